"""Job threads ("slots") and the bookkeeping of what each one is running."""

from __future__ import annotations

import ctypes
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..exceptions import InterruptedByTimeout, LaterError
from .claiming import Claimed
from .outcomes import Outcome

logger = logging.getLogger(__name__)


@dataclass
class Running:
    item: Claimed
    slot: Slot | None = None
    started: float = 0.0
    deadline: float | None = None
    interrupted_at: float | None = None

    def timeout_step_at(self, grace: float) -> float | None:
        """When the worker next acts on this job's timeout: at the deadline it interrupts
        the job, ``grace`` seconds after the interrupt it abandons the thread. None for a
        job without a timeout or not started yet."""
        if self.slot is None or self.deadline is None:
            return None
        if self.interrupted_at is None:
            return self.deadline
        return self.interrupted_at + grace


class Slot(threading.Thread):
    """Takes claimed jobs from the shared inbox and runs them one at a time."""

    def __init__(
        self,
        number: int,
        inbox: queue.SimpleQueue[Claimed | None],
        run: Callable[[Claimed], Outcome],
        done: Callable[[Slot, Claimed, Outcome], None],
    ) -> None:
        super().__init__(name=f"later-slot-{number}", daemon=True)
        self.inbox = inbox
        self._run = run
        self._done = done
        self.abandoned = False
        self.current: Claimed | None = None
        self.in_task = False

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.abandoned:
                item = self.inbox.get()
                if item is None:
                    return
                self.current = item
                outcome = self._run(item)
                self.current = None
                self._done(self, item, outcome)
        finally:
            connection.close()

    def interrupt(self) -> None:
        """Raise InterruptedByTimeout inside this thread at its next Python instruction."""
        if self.ident is not None and self.in_task:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.ident), ctypes.py_object(InterruptedByTimeout)
            )


def deadline_for(item: Claimed, grace: float) -> float | None:
    """When the worker steps in on a job: at its timeout for a plain function; an async
    task times itself out, so the worker only steps in ``grace`` seconds later."""
    record = item.record
    if record is None or record.timeout is None:
        return None
    deadline = time.monotonic() + record.timeout
    try:
        from inspect import iscoroutinefunction

        from ..results import resolve_task

        if iscoroutinefunction(resolve_task(record.task_path).func):
            deadline += grace
    except LaterError:  # the job fails to import and settles by itself
        return None
    return deadline
