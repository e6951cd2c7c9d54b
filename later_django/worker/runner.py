"""The worker: claims jobs, hands them to slots, records outcomes, stops in two phases."""

from __future__ import annotations

import logging
import os
import queue
import secrets
import signal
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from types import FrameType

from django.tasks import task_backends
from django.tasks.exceptions import InvalidTaskBackend
from django.utils import timezone

from ..backend import LaterBackend
from ..conf import later_settings
from ..db import retrying
from ..exceptions import InterruptedByTimeout, LaterError
from ..topics import runtime as partitions
from .claiming import BATCH, Claimed, claim
from .executing import execute, failed_outcome
from .metrics import MetricsBatch
from .outcomes import FAILED, RELEASE, RETRY, SUCCESS, Outcome, record_outcomes
from .services import Services
from .slots import Running, Slot, deadline_for
from .wakeup import PostgresListener, SqliteWatcher, idle_wait, use_wal

logger = logging.getLogger(__name__)

DEFAULT_CONCURRENCY = 8
# Successes are routine; failures and retries are what an operator looks for.
OUTCOME_LOG_LEVELS = {
    SUCCESS: logging.DEBUG,
    RETRY: logging.WARNING,
    FAILED: logging.ERROR,
    RELEASE: logging.WARNING,
}
INTERRUPT_GRACE = 1.0
# Outcomes waiting for the writer thread beyond this many take up room in the
# inbox, so a worker whose writer falls behind claims less until it catches up.
WRITER_SLACK = 2 * BATCH


@dataclass
class WorkerConfig:
    backend: str = "default"
    concurrency: int = DEFAULT_CONCURRENCY
    queues: list[str] | None = None
    burst: bool = False
    max_jobs: int | None = None
    shutdown_timeout: float = 30.0
    install_signal_handlers: bool = True
    counts: Counter[str] = field(default_factory=Counter)


def new_worker_id() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{secrets.token_hex(3)}"


class Worker:
    def __init__(self, config: WorkerConfig) -> None:
        try:
            backend = task_backends[config.backend]
        except InvalidTaskBackend as e:
            raise LaterError(
                f"Task backend {config.backend!r} is not in settings.TASKS; its aliases are "
                f"{', '.join(task_backends.settings)}."
            ) from e
        if not isinstance(backend, LaterBackend):
            raise LaterError(
                f"Task backend {config.backend!r} is {type(backend).__name__}; later_worker "
                "needs one whose BACKEND is 'later_django.backend.LaterBackend'."
            )
        if backend.options_error is not None:
            raise backend.options_error
        unknown = sorted(set(config.queues or ()) - backend.queues) if backend.queues else []
        if unknown:
            raise LaterError(
                f"Queue {unknown[0]!r} is not configured for backend {config.backend!r}; "
                f"its QUEUES are {', '.join(sorted(backend.queues))}."
            )
        self.config = config
        self.backend = backend
        self.namespace = backend.namespace
        self.using = backend.database
        self.id = new_worker_id()
        self.inbox: queue.SimpleQueue[Claimed | None] = queue.SimpleQueue()
        self.outbox: queue.SimpleQueue[Outcome] = queue.SimpleQueue()
        self.wake = threading.Event()
        self.stop_requested = threading.Event()
        self.lock = threading.Lock()
        self.running: dict[str, Running] = {}
        self.slots: list[Slot] = []
        self.pending: list[Outcome] = []
        self.unstored = 0  # outcomes handed to the outbox and not yet stored (under lock)
        self.writer: threading.Thread | None = None
        self.writer_stop = threading.Event()
        self.metrics = MetricsBatch()
        self.counts = config.counts
        self.claimed_total = 0
        self.signals = 0
        self.drain_deadline = 0.0
        self.started_at = timezone.now()
        # Beyond the busy slots, up to one batch ("the reserve", at most twice the
        # slots) waits in the inbox.
        self.reserve = min(2 * config.concurrency, BATCH)
        self.capacity = config.concurrency + self.reserve
        partitions.start(self)  # refuses to start with a mismatched topic layout

    # -- lifecycle ---------------------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped (or, in burst mode, until nothing is runnable); return 0."""
        if self.config.install_signal_handlers:
            signal.signal(signal.SIGINT, self._on_signal)
            signal.signal(signal.SIGTERM, self._on_signal)
        logger.info(
            "worker starting id=%s namespace=%s queues=%s concurrency=%s burst=%s",
            self.id,
            self.namespace,
            ",".join(self.config.queues or ["*"]),
            self.config.concurrency,
            self.config.burst,
        )
        services = Services(self)
        listener = None
        watcher = None
        if self.backend_vendor() == "postgresql":
            listener = PostgresListener(self.using, self.namespace, self.wake)
            listener.start()
            # Outcomes are stored on a connection of their own, so the server writes
            # one batch's outcomes while the next batch is claimed. SQLite has one
            # writer at a time: there the loop stores them itself.
            self.writer = threading.Thread(
                target=self._write_outcomes, name="later-outcomes", daemon=True
            )
            self.writer.start()
        else:
            use_wal(self.using)
            watcher = SqliteWatcher(self.using)
        services.start()
        for number in range(self.config.concurrency):
            self._add_slot(number)
        began = time.monotonic()
        try:
            self._loop(watcher)
        finally:
            for _ in self.slots:
                self.inbox.put(None)
            self._stop_writer()
            services.stop()
            if listener is not None:
                listener.stop()
            self._flush_metrics()
            logger.info(
                "worker stopped id=%s claimed=%s succeeded=%s failed=%s retried=%s released=%s "
                "fenced=%s seconds=%.1f",
                self.id,
                self.claimed_total,
                self.counts[SUCCESS],
                self.counts[FAILED],
                self.counts[RETRY],
                self.counts[RELEASE],
                self.counts["fenced"],
                time.monotonic() - began,
            )
        return 0

    def backend_vendor(self) -> str:
        from django.db import connections

        return connections[self.using].vendor

    def request_stop(self) -> None:
        """Stop claiming and let running jobs finish within the shutdown timeout."""
        if not self.stop_requested.is_set():
            self.drain_deadline = time.monotonic() + self.config.shutdown_timeout
            self.stop_requested.set()
        self.wake.set()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals += 1
        name = signal.Signals(signum).name
        if self.signals == 1:
            logger.warning(
                "%s received: no new jobs; waiting up to %ss for %s running job(s). "
                "Send it again to exit at once.",
                name,
                self.config.shutdown_timeout,
                len(self.running),
            )
            self.request_stop()
        else:
            logger.warning("%s received again: exiting now; running jobs' leases will lapse", name)
            os._exit(1)

    # -- the main loop -----------------------------------------------------------------------

    def _loop(self, watcher: SqliteWatcher | None) -> None:
        poll = later_settings.poll_interval
        while True:
            self.wake.clear()
            if self.writer is None:
                self._collect_outcomes()
            self._check_timeouts()
            if self.stop_requested.is_set():
                self._release_unstarted()
                if self._settled():
                    return
                if time.monotonic() >= self.drain_deadline:
                    self._release_running()
                    self._store_now()
                    return
                idle_wait(self.wake, 0.05, None)
                continue
            limit = self.config.max_jobs
            if limit is not None and self.claimed_total >= limit:
                if self._settled():
                    return
                idle_wait(self.wake, poll, None)
                continue
            # One batch may wait in the inbox beyond the busy slots, so slots never
            # idle between the end of a job and the next claim. The next batch is
            # claimed once that one has been taken up, whole: a claim costs about
            # the same for one job as for a full batch.
            with self.lock:
                free = self.capacity - len(self.running) - max(0, self.unstored - WRITER_SLACK)
            wanted = self.reserve
            if limit is not None:
                free = min(free, limit - self.claimed_total)
                wanted = min(wanted, limit - self.claimed_total)
            can_claim = free >= wanted
            claimed = self._claim(free) if can_claim else []
            if claimed:
                continue
            if self.config.burst and self._settled():
                if self._more_to_do():
                    continue
                return
            idle_wait(self.wake, poll if can_claim else 1.0, watcher if can_claim else None)

    def _more_to_do(self) -> bool:
        """Before a burst worker exits: promote what is due, then look for anything runnable.

        The maintenance thread promotes too, and a command it has just queued can
        postdate the claim that found nothing; so wait for its promotion, then look.
        """
        from .claiming import runnable
        from .maintenance import promote_due

        if retrying(
            lambda: promote_due(self.namespace, using=self.using, skip_locked=False),
            what="promote",
            using=self.using,
        ):
            return True
        return retrying(
            lambda: runnable(self.namespace, queues=self.config.queues, using=self.using),
            what="runnable",
            using=self.using,
        )

    def _settled(self) -> bool:
        """Whether nothing is running and every outcome has been stored."""
        with self.lock:
            return not self.running and self.unstored == 0

    def _claim_queue(self, free: int) -> list[Claimed]:
        return retrying(
            lambda: claim(
                self.namespace,
                self.id,
                queues=self.config.queues,
                free=free,
                lease_seconds=self.backend.later.lease_seconds,
                using=self.using,
            ),
            what="claim",
            using=self.using,
        )

    def _claim(self, free: int) -> list[Claimed]:
        claimed = partitions.claim(self, free, self._claim_queue)  # heads and commands in turns
        if not claimed:
            return claimed
        now = timezone.now()
        self.claimed_total += len(claimed)
        self.metrics.transition("running", now, len(claimed))
        with self.lock:
            for item in claimed:
                mode = partitions.wait_mode(item)
                self.metrics.wait(mode, (now - item.available_at).total_seconds() * 1000, now)
                self.running[item.job_id] = Running(
                    item=item,
                    started=time.monotonic(),
                    deadline=deadline_for(item, INTERRUPT_GRACE),
                )
        for item in claimed:
            logger.debug("job claimed id=%s epoch=%s", item.job_id, item.epoch)
            self.inbox.put(item)
        return claimed

    # -- slots -------------------------------------------------------------------------------

    def _add_slot(self, number: int) -> None:
        slot = Slot(number, self.inbox, self._execute, self._slot_done)
        self.slots.append(slot)
        slot.start()

    def _execute(self, item: Claimed) -> Outcome:
        with self.lock:
            running = self.running.get(item.job_id)
            if running is not None:
                running.slot = next((s for s in self.slots if s.current is item), None)
                running.started = time.monotonic()
                running.deadline = deadline_for(item, INTERRUPT_GRACE)
        try:
            return execute(item, self.backend, self.id)
        except BaseException as e:  # an interrupt that landed outside the task's own code
            if not isinstance(e, Exception | InterruptedByTimeout):
                raise
            logger.exception("job id=%s failed outside its task", item.job_id)
            return failed_outcome(item, e, self.id)

    def _slot_done(self, slot: Slot, item: Claimed, outcome: Outcome) -> None:
        with self.lock:
            if self.running.pop(item.job_id, None) is None:
                return  # already settled (timed out and abandoned, or released)
            self._emit(outcome)
        self.wake.set()

    def _check_timeouts(self) -> None:
        now = time.monotonic()
        with self.lock:
            late = [r for r in self.running.values() if r.deadline is not None and now > r.deadline]
        for running in late:
            if running.slot is None:
                continue
            if running.interrupted_at is None:
                logger.warning(
                    "job id=%s exceeded its timeout; interrupting it", running.item.job_id
                )
                running.interrupted_at = now
                running.slot.interrupt()
            elif now - running.interrupted_at > INTERRUPT_GRACE:
                self._abandon(running)

    def _abandon(self, running: Running) -> None:
        """Give up on a job stuck past its timeout: fail it and replace its slot."""
        with self.lock:
            if self.running.pop(running.item.job_id, None) is None:
                return
        assert running.slot is not None
        running.slot.abandoned = True
        record = running.item.record
        timeout = record.timeout if record else None
        logger.error(
            "job id=%s did not stop within %ss of its timeout; its thread is abandoned",
            running.item.job_id,
            INTERRUPT_GRACE,
        )
        from ..exceptions import TaskTimeout

        outcome = failed_outcome(
            running.item,
            TaskTimeout(
                f"Job {running.item.job_id!r} ran longer than its timeout of {timeout} "
                "seconds and did not stop when interrupted."
            ),
            self.id,
        )
        with self.lock:
            self._emit(outcome)
        self._add_slot(len(self.slots))

    def _release_running(self) -> None:
        """Hand unfinished jobs back at once, without using up an attempt."""
        with self.lock:
            leftovers = list(self.running.values())
            self.running.clear()
        for running in leftovers:
            logger.warning("job id=%s released at shutdown", running.item.job_id)
            self._release(running)

    def _release_unstarted(self) -> None:
        """Hand back claimed jobs still waiting in the inbox: stopping starts nothing new."""
        while True:
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return
            if item is None:
                continue
            with self.lock:
                running = self.running.pop(item.job_id, None)
            if running is not None:
                logger.info("job id=%s released at shutdown before it started", item.job_id)
                self._release(running)

    def _release(self, running: Running) -> None:
        record = running.item.record
        if record is not None and record.attempts:
            record.attempts.pop()
        outcome = Outcome(running.item.job_id, running.item.epoch, RELEASE, record, timezone.now())
        with self.lock:
            self._emit(outcome)

    # -- outcomes ----------------------------------------------------------------------------

    def _emit(self, outcome: Outcome) -> None:
        """Hand an outcome over to be stored; the caller holds ``self.lock``."""
        self.unstored += 1
        self.outbox.put(outcome)

    def _write_outcomes(self) -> None:
        """The writer thread: store outcomes as they come, until stopped and drained."""
        from django.db import connection

        try:
            while True:
                if not self.pending:
                    try:
                        self.pending.append(self.outbox.get(timeout=0.1))
                    except queue.Empty:
                        if self.writer_stop.is_set():
                            return
                        continue
                self._collect_outcomes()
                self.wake.set()  # stored outcomes can make more work claimable
        finally:
            connection.close()

    def _store_now(self, timeout: float = 10.0) -> None:
        """Store every outcome handed over so far (waiting for the writer, if there is one)."""
        if self.writer is None:
            self._collect_outcomes()
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.writer.is_alive():
            with self.lock:
                if self.unstored == 0:
                    return
            time.sleep(0.01)

    def _stop_writer(self) -> None:
        if self.writer is None:
            return
        self._store_now()
        self.writer_stop.set()
        self.writer.join(timeout=10)
        with self.lock:
            left = self.unstored
        if left:
            logger.error(
                "%s outcome(s) could not be stored before exit; their leases will lapse and "
                "the jobs run again",
                left,
            )

    def _collect_outcomes(self) -> None:
        while True:
            try:
                self.pending.append(self.outbox.get_nowait())
            except queue.Empty:
                break
        if not self.pending:
            return
        batch = self.pending
        try:
            written = retrying(
                lambda: record_outcomes(
                    self.namespace,
                    self.id,
                    batch,
                    retention_seconds=self.backend.later.retention_seconds,
                    using=self.using,
                ),
                what="record outcomes",
                using=self.using,
            )
        except Exception:
            logger.exception("could not store %s outcome(s); will try again", len(batch))
            time.sleep(0.5)
            return
        self.pending = []
        with self.lock:
            self.unstored -= len(batch)
        now = timezone.now()
        self.counts["fenced"] += len(batch) - len(written)
        for outcome in written:
            self.counts[outcome.kind] += 1
            for stage in outcome.transitions:
                self.metrics.transition(stage, now)
            level = OUTCOME_LOG_LEVELS.get(outcome.kind, logging.INFO)
            if logger.isEnabledFor(level):
                logger.log(level, "job %s id=%s", outcome.kind, outcome.job_id)

    def _flush_metrics(self) -> None:
        try:
            self.metrics.flush(self.namespace, using=self.using)
        except Exception:
            logger.exception("could not store metrics")
