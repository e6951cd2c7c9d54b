"""Claimed jobs a worker gives back to the queue without running them to the end.

Three cases, each stored as a ``release`` outcome that does not use up an
attempt: jobs held in the inbox too long behind busy slots (``hand_back_held``,
at each turn of the main loop), jobs still waiting in the inbox once a stop is
asked for (``release_unstarted``), and jobs still running when the shutdown
timeout ends (``release_running``).
"""

from __future__ import annotations

import logging
import queue
import time
from typing import TYPE_CHECKING

from django.utils import timezone

from ..engine.claiming import Claimed
from ..engine.outcomes import RELEASE, Outcome
from .slots import Running

if TYPE_CHECKING:
    from .runner import Worker

# Its lines keep the logger they have always had, which operators filter on.
logger = logging.getLogger("later_django.worker.runner")

# A claimed job that has waited this long for a free slot goes back to the
# queue, for another worker (see hand_back_held).
HELD_TOO_LONG = 2.0
HELD_CHECK_EVERY = HELD_TOO_LONG / 4  # at most this often: each look drains the inbox


def hand_back_held(worker: Worker) -> None:
    """Give back claimed jobs that have waited too long for a free slot.

    The reserve is sized by the average of recent jobs; when jobs turn long
    (a report after a run of e-mails), the jobs held behind them would wait
    for their end while other workers idle. Once one has waited
    HELD_TOO_LONG, every job still waiting in the inbox goes back to the
    queue without using up an attempt (those claimed just after it wait
    behind the same busy slots), and the wait counts as a job time, so the
    reserve shrinks rather than claims them again.
    """
    now = time.monotonic()
    if now - worker.held_checked_at < HELD_CHECK_EVERY:
        return
    worker.held_checked_at = now
    with worker.lock:
        held = [r.started for r in worker.running.values() if r.slot is None]
    if not held or now - min(held) < HELD_TOO_LONG:
        return
    kept: list[Claimed | None] = []
    stale: list[Running] = []
    while True:
        try:
            item = worker.inbox.get_nowait()
        except queue.Empty:
            break
        with worker.lock:
            running = None if item is None else worker.running.get(item.job_id)
            if running is not None:
                del worker.running[running.item.job_id]
                stale.append(running)
                continue
        kept.append(item)
    for item in kept:
        worker.inbox.put(item)
    if not stale:
        return
    waited = now - min(r.started for r in stale)
    with worker.lock:
        worker.job_seconds = max(worker.job_seconds or 0.0, waited)
        worker.size_reserve()
        worker.claimed_total -= len(stale)
    logger.info(
        "%s claimed job(s) waited %.1fs for a free thread; handing them back to the queue",
        len(stale),
        waited,
    )
    for running in stale:
        release(worker, running, routine=True)


def release_running(worker: Worker) -> None:
    """Hand unfinished jobs back at once, without using up an attempt."""
    with worker.lock:
        leftovers = list(worker.running.values())
        worker.running.clear()
    for running in leftovers:
        logger.warning("job id=%s released at shutdown", running.item.job_id)
        release(worker, running)


def release_unstarted(worker: Worker) -> None:
    """Hand back claimed jobs still waiting in the inbox: stopping starts nothing new."""
    while True:
        try:
            item = worker.inbox.get_nowait()
        except queue.Empty:
            return
        if item is None:
            continue
        with worker.lock:
            running = worker.running.pop(item.job_id, None)
        if running is not None:
            logger.info("job id=%s released at shutdown before it started", item.job_id)
            release(worker, running)


def release(worker: Worker, running: Running, *, routine: bool = False) -> None:
    """Store a ``release`` outcome for a claimed job: back to the queue, its attempt undone."""
    running.item.load()
    record = running.item.record
    if record is not None and record.attempts:
        record.attempts.pop()
    outcome = Outcome(
        running.item.job_id,
        running.item.epoch,
        RELEASE,
        record,
        timezone.now(),
        routine=routine,
    )
    with worker.lock:
        worker.outcomes.emit(outcome)
