"""The worker's outcome writer: outcomes handed over by the slots, stored a batch at a time.

On PostgreSQL it is a thread with a connection of its own (``later-outcomes``),
so the server records one batch while the main thread claims the next. It
gathers outcomes for up to ``GATHER_SECONDS`` while jobs are still running
(``ORDERED_GATHER_SECONDS`` once an ordered job's outcome is among them), so
one statement (and one commit) serves a batch rather than a job or two. On
SQLite, which has one writer at a time, the main loop calls ``collect()``
between claims instead. An atomic task's outcome arrives already stored in
its own transaction (``Outcome.stored``) and is only counted and logged.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections import Counter
from typing import TYPE_CHECKING

from django.db import DatabaseError, connections
from django.utils import timezone

from ..db import limit_idle_transactions, retrying
from ..engine.outcomes import CANCELLED, FAILED, RELEASE, RETRY, SUCCESS, Outcome, record_outcomes
from ..records import scrub_text
from .services import FailureRun

if TYPE_CHECKING:
    from .runner import Worker

# The per-job outcome lines keep the logger they have always had, which operators filter on.
logger = logging.getLogger("later_django.worker.runner")

# The writer waits this long at most for outcomes of jobs still running, so that
# one statement (and one commit) stores a batch rather than each job on its own.
# Each commit the writer spares is CPU the server and the job bodies' own commits
# get back: with two slots, 20 ms drained a quarter more jobs a second than 2 ms.
GATHER_SECONDS = 0.02
# An ordered job's partition waits for its outcome, so once one is pending the
# writer waits no longer than this. Storing each at once cost ordered drains a
# seventh of their rate in statements.
ORDERED_GATHER_SECONDS = 0.002
# It stops waiting once this many outcomes are gathered. The worker claims less
# while more than this many wait (``WRITER_SLACK``), so a batch never waits on
# a claim that waits on it.
OUTCOME_BATCH = 32
# Successes are routine; failures and retries are what an operator looks for.
OUTCOME_LOG_LEVELS = {
    SUCCESS: logging.DEBUG,
    RETRY: logging.WARNING,
    FAILED: logging.ERROR,
    RELEASE: logging.WARNING,
    CANCELLED: logging.INFO,  # someone asked for it
}


class OutcomeWriter:
    """Stores one worker's outcomes; ``unstored`` counts those handed over and not yet
    stored, and is read and written under the worker's lock."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.outbox: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self.pending: list[Outcome] = []
        self.unstored = 0
        self.unstored_ids: Counter[str] = Counter()  # their jobs, which the worker still holds
        # Those of them that may be partition heads: their partitions stay leased to this
        # worker until they are stored, so the topics heartbeat renews those leases.
        self.unstored_heads: Counter[str] = Counter()
        # An outcome that other work waits on has been handed over since the last gather.
        self.urgent = False
        # The last gather waits (or waited) GATHER_SECONDS for a batch. Left set once
        # it ends: an urgent outcome then sets batch_ready early, which the next
        # gather clears before it waits.
        self.waiting_long = False
        self.thread: threading.Thread | None = None
        self.stopping = threading.Event()
        # Set when the thread should stop gathering: a batch is waiting, or nothing runs.
        self.batch_ready = threading.Event()
        self.gather_seconds = GATHER_SECONDS
        self.failures = FailureRun(logger)

    @property
    def threaded(self) -> bool:
        return self.thread is not None

    def start_thread(self) -> None:
        self.thread = threading.Thread(target=self._run, name="later-outcomes", daemon=True)
        self.thread.start()

    def emit(self, outcome: Outcome) -> None:
        """Hand an outcome over to be stored; the caller holds the worker's lock."""
        self.unstored += 1
        self.unstored_ids[outcome.job_id] += 1
        self.outbox.put(outcome)
        if outcome.may_touch_partition:  # the partition's next job waits for it
            self.urgent = True
            self.unstored_heads[outcome.job_id] += 1
        if (
            (self.urgent and self.waiting_long)
            or not self.worker.running
            or len(self.pending) + self.outbox.qsize() >= OUTCOME_BATCH
        ):
            self.batch_ready.set()

    def _run(self) -> None:
        """The thread: store outcomes as they come, until stopped and drained."""
        worker = self.worker
        limit_idle_transactions(worker.using, worker.backend.later.lease_seconds)
        try:
            while True:
                if not self.pending:
                    try:
                        self.pending.append(self.outbox.get(timeout=0.1))
                    except queue.Empty:
                        if self.stopping.is_set():
                            return
                        continue
                self._gather()
                self.collect()
                worker.wake.set()  # stored outcomes can make more work claimable
        finally:
            connections[worker.using].close()

    def _gather(self) -> None:
        """Wait briefly for more outcomes while jobs that will produce them are running.

        A statement costs about the same for one outcome as for a batch, so the
        thread stores a batch at a time when jobs finish close together. It stops
        waiting at a whole batch, at the deadline, when nothing else is running,
        or when the worker is stopping; with an ordered job's outcome in hand it
        waits ``ORDERED_GATHER_SECONDS`` at most.
        """
        with self.worker.lock:
            self._take_outbox()
            waiting = bool(self.worker.running) and len(self.pending) < OUTCOME_BATCH
            self.waiting_long = waiting and not self.urgent
            seconds = self.gather_seconds if self.waiting_long else ORDERED_GATHER_SECONDS
            self.urgent = False  # what made it urgent is pending now, and stored next
            if waiting:
                self.batch_ready.clear()
        if waiting and not self.stopping.is_set():
            self.batch_ready.wait(seconds)

    def store_now(self, timeout: float = 10.0) -> None:
        """Store every outcome handed over so far (waiting for the thread, if there is one)."""
        if self.thread is None:
            self.collect()
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.thread.is_alive():
            with self.worker.lock:
                if self.unstored == 0:
                    return
            time.sleep(0.01)

    def stop(self) -> None:
        if self.thread is None:
            return
        self.store_now()
        self.stopping.set()
        self.thread.join(timeout=10)
        with self.worker.lock:
            left = self.unstored
        if left:
            logger.error(
                "%s outcome(s) could not be stored before exit; their leases will lapse and "
                "the jobs run again",
                left,
            )

    def _make_storable(self, outcomes: list[Outcome]) -> int:
        """After a batch failed for a reason other than the database, mend the outcomes
        whose records cannot be encoded; return how many there were.

        Such an outcome would fail every batch it is in for as long as the worker
        ran, and hold every other outcome of the batch with it. Its record's free
        text is made storable first; a record that still cannot be encoded is
        left out, and the outcome stores the job's stage over the record as
        it was claimed.
        """
        mended = 0
        for outcome in outcomes:
            if outcome.record is None:
                continue
            try:
                outcome.record.encode()
                continue
            except Exception as e:  # noqa: BLE001  (whatever stops it being stored)
                problem = e
            mended += 1
            scrub_text(outcome.record)
            try:
                outcome.record.encode()
            except Exception:  # noqa: BLE001
                outcome.record = None
            logger.error(
                "job id=%s: its record could not be stored (%s); %s",
                outcome.job_id,
                problem,
                "stored with its text escaped"
                if outcome.record is not None
                else "its outcome is stored without it",
            )
        return mended

    def _take_outbox(self) -> None:
        while True:
            try:
                self.pending.append(self.outbox.get_nowait())
            except queue.Empty:
                return

    def collect(self) -> None:
        """Store what is pending in one batch; on failure keep it for the next call."""
        worker = self.worker
        self._take_outbox()
        if not self.pending:
            return
        batch = self.pending
        unstored = [o for o in batch if o.stored is None]  # atomic tasks stored their own
        try:
            written = [o for o in batch if o.stored] + retrying(
                lambda: record_outcomes(
                    worker.namespace,
                    worker.id,
                    unstored,
                    retention_seconds=worker.backend.later.retention_seconds,
                    using=worker.using,
                ),
                what="record outcomes",
                using=worker.using,
            )
        except Exception as e:  # noqa: BLE001  (FailureRun logs it, traceback first)
            if not isinstance(e, DatabaseError) and self._make_storable(unstored):
                return  # stored at the next call, without the pause
            self.failures.failed(
                e,
                f"could not store {len(batch)} outcome(s); will try again",
                f"still cannot store {len(batch)} outcome(s)",
            )
            time.sleep(0.5)
            return
        if self.failures.ended():
            logger.warning("stored %s outcome(s) held since the database failed", len(batch))
        self.pending = []
        with worker.lock:
            self.unstored -= len(batch)
            stored_ids = Counter(o.job_id for o in batch)
            self.unstored_ids -= stored_ids  # keeps positive counts
            self.unstored_heads -= stored_ids
        now = timezone.now()
        worker.counts["fenced"] += len(batch) - len(written)
        if any(o.record is not None and o.record.topic is not None for o in written):
            worker.topics.heads_may_be_due()  # the partition's next job may be runnable now
        reached: Counter[str] = Counter()
        for outcome in written:
            worker.counts[outcome.kind] += 1
            reached.update(outcome.transitions)
            level = (
                logging.DEBUG
                if outcome.routine
                else OUTCOME_LOG_LEVELS.get(outcome.kind, logging.INFO)
            )
            if logger.isEnabledFor(level):
                logger.log(level, "job %s id=%s", outcome.kind, outcome.job_id)
        worker.metrics.transitions(reached, now)
