"""Job threads ("slots") and the bookkeeping of what each one is running."""

from __future__ import annotations

import contextlib
import ctypes
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..engine.claiming import Claimed
from ..engine.outcomes import Outcome
from ..exceptions import InterruptedByCancel, InterruptedByTimeout, LaterError

logger = logging.getLogger(__name__)


@dataclass
class Running:
    item: Claimed
    slot: Slot | None = None
    started: float = 0.0
    deadline: float | None = None
    interrupted_at: float | None = None
    cancel_seen_at: float | None = None  # when a cancel of the job reached this worker
    interrupted_for: type[BaseException] = InterruptedByTimeout

    def cancel_due_at(self, cancel_grace: float) -> float | None:
        """When a cancelled job's grace runs out; None for a job with no cancel."""
        return None if self.cancel_seen_at is None else self.cancel_seen_at + cancel_grace

    def step_at(self, grace: float, cancel_grace: float) -> float | None:
        """When the worker next acts on this job: at its timeout's deadline, or when the
        grace of its cancel runs out, it interrupts the job; ``grace`` seconds after the
        interrupt it abandons the thread. None for a job with neither, or not started."""
        if self.slot is None:
            return None
        if self.interrupted_at is not None:
            return self.interrupted_at + grace
        steps = [at for at in (self.deadline, self.cancel_due_at(cancel_grace)) if at is not None]
        return min(steps, default=None)


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
        self.running_loop: tuple | None = None  # (loop, asyncio task) of an async task
        self.cancel_interrupted = False

    def run(self) -> None:
        from django.db import connection

        try:
            while not self.abandoned:
                item = self.inbox.get()
                if item is None:
                    return
                self.current = item
                self.cancel_interrupted = False
                outcome = self._run(item)
                self.current = None
                self._done(self, item, outcome)
        finally:
            connection.close()

    def interrupt(self, kind: type[BaseException] = InterruptedByTimeout) -> None:
        """Raise ``kind`` inside this thread at its next Python instruction.

        A cancelled async task has its asyncio task cancelled instead, which
        reaches it even while its event loop waits.
        """
        running_loop = self.running_loop
        if kind is InterruptedByCancel and running_loop is not None:
            loop, task = running_loop
            self.cancel_interrupted = True
            with contextlib.suppress(RuntimeError):  # the loop closed: the task has ended
                loop.call_soon_threadsafe(task.cancel)
            return
        if self.ident is not None and self.in_task:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self.ident), ctypes.py_object(kind)
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
