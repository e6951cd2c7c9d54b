"""Running jobs past their timeout or their cancel's grace: interrupted, then abandoned.

The main loop calls ``check`` at each turn (and waits no longer than the next
such moment, ``Worker._until_a_check``). A job past its time is interrupted
first: an exception raised in its thread, or its asyncio task cancelled. One
still running ``INTERRUPT_GRACE`` later is abandoned: its attempt is settled
(a timeout, retried by the task's policy, or a cancel) and its slot replaced,
while the thread runs on in the background.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..exceptions import InterruptedByCancel, TaskTimeout
from .executing import abandoned_cancel_outcome, abandoned_outcome
from .slots import Running

if TYPE_CHECKING:
    from .runner import Worker

# Its lines keep the logger they have always had, which operators filter on.
logger = logging.getLogger("later_django.worker.runner")

INTERRUPT_GRACE = 1.0


def check(worker: Worker) -> None:
    """Interrupt jobs past their timeout or their cancel's grace; abandon those that
    did not stop within INTERRUPT_GRACE of the interrupt."""
    now = time.monotonic()
    grace = worker.cancel_grace
    with worker.lock:
        due = [
            r
            for r in worker.running.values()
            if (at := r.step_at(INTERRUPT_GRACE, grace)) is not None and now > at
        ]
    for running in due:
        if running.interrupted_at is None:
            assert running.slot is not None  # a step is due only for a started job
            cancel_at = running.cancel_due_at(grace)
            if cancel_at is not None and now > cancel_at:
                running.interrupted_for = InterruptedByCancel
                logger.warning(
                    "job id=%s was cancelled and did not stop within %ss; interrupting it",
                    running.item.job_id,
                    grace,
                )
            else:
                logger.warning(
                    "job id=%s exceeded its timeout; interrupting it", running.item.job_id
                )
            running.interrupted_at = now
            running.slot.interrupt(running.interrupted_for)
        else:
            abandon(worker, running)


def abandon(worker: Worker, running: Running) -> None:
    """Give up on a job stuck past its timeout: settle the attempt and replace its slot."""
    with worker.lock:
        if worker.running.pop(running.item.job_id, None) is None:
            return
    assert running.slot is not None
    running.slot.abandoned = True
    if running.interrupted_for is InterruptedByCancel:
        logger.error(
            "job id=%s did not stop within %ss of its interrupt after its cancel; its "
            "thread is abandoned",
            running.item.job_id,
            INTERRUPT_GRACE,
        )
        with worker.lock:
            worker.outcomes.emit(abandoned_cancel_outcome(running.item, worker.id))
        worker.add_slot(len(worker.slots))
        return
    record = running.item.record
    timeout = record.timeout if record else None
    logger.error(
        "job id=%s did not stop within %ss of its timeout; its thread is abandoned",
        running.item.job_id,
        INTERRUPT_GRACE,
    )
    outcome = abandoned_outcome(
        running.item,
        TaskTimeout(
            f"Job {running.item.job_id!r} ran longer than its timeout of {timeout} "
            "seconds and did not stop when interrupted."
        ),
        worker.backend,
        worker.id,
    )
    with worker.lock:
        worker.outcomes.emit(outcome)
    worker.add_slot(len(worker.slots))
