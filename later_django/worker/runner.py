"""The worker: claims jobs, hands them to slots, records outcomes, stops in two phases."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import queue
import signal
import threading
import time
from collections import Counter
from types import FrameType

from django.db import DatabaseError, connections
from django.utils import timezone

from ..conf import later_settings, renewal_interval
from ..db import limit_idle_transactions, retrying
from ..engine.claiming import BATCH, Claimed, Claims, claim, unheld
from ..engine.outcomes import CANCELLED, FAILED, RELEASE, RETRY, SUCCESS, Outcome
from ..exceptions import LaterError
from ..states import Stage
from ..topics.runtime import TopicParticipation, wait_mode
from . import handback, timeouts
from .config import WorkerConfig, check_schema, later_backend, new_worker_id
from .executing import execute, failed_outcome
from .metrics import MetricsBatch, wait_bin
from .outage import Outage
from .services import Services
from .slots import Running, Slot, deadline_for
from .wakeup import PostgresListener, SqliteWatcher, idle_wait, use_wal
from .writer import OUTCOME_BATCH, OutcomeWriter

logger = logging.getLogger(__name__)

# Outcomes waiting for the writer thread beyond this many take up room in the
# inbox, so a worker whose writer falls behind claims less until it catches up.
# It also bounds the finished runs a killed worker leaves unstored, which run again.
WRITER_SLACK = OUTCOME_BATCH
# How much claimed work a worker holds beyond its busy slots ("the reserve"):
# the jobs its slots will start within this long, by the recent average job
# time, so the slots are not left idle while the next claim is on its way, and
# never more than four batches. Long jobs need none: a worker then holds only
# what its slots run, and leaves the rest to other workers.
HOLD_SECONDS = 0.1
MAX_RESERVE = 4 * BATCH
# The main loop waits at least this long between checks of timeouts and held
# jobs, however close the next one is, so that one just passed never makes it spin.
CHECK_SLACK = 0.005
# The weight of the latest job in the running average of job times.
JOB_TIME_WEIGHT = 0.1


class Worker:
    def __init__(self, config: WorkerConfig) -> None:
        backend = later_backend(config.backend, needed_by="later_worker")
        check_schema(backend.database)
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
        self.wake = threading.Event()
        self.stop_requested = threading.Event()
        self.lock = threading.Lock()
        self.running: dict[str, Running] = {}
        self.slots: list[Slot] = []
        self.outcomes = OutcomeWriter(self)
        self.held_checked_at = 0.0  # when handback.hand_back_held last looked (main thread)
        self.outage = Outage()  # claims the database refused (main thread)
        # When to look for jobs leased to it that it does not hold: none at start, since
        # its id is new.
        self.unheld_at = self._next_unheld_look()
        self.claim_at = 0  # room the main loop waits for before it claims (under lock)
        # What the delivery queue gave the claim under way (main thread; see _claim).
        self.queue_claims: Claims | None = None
        self.waiting_until = math.inf  # when the main loop's current wait ends (under lock)
        self.metrics = MetricsBatch()
        self.counts = config.counts
        self.claimed_total = 0
        self.signals = 0
        self.drain_deadline = 0.0
        self.started_at = timezone.now()
        self.seconds = 0.0  # how long run() ran, once it has returned
        # Beyond the busy slots, the reserve waits in the inbox: none until the
        # first jobs finish and show how long jobs take (see HOLD_SECONDS).
        self.reserve = 0  # under lock
        self.job_seconds: float | None = None  # running average of job times (under lock)
        self.cancel_grace = later_settings.cancel_grace  # seconds a cancelled job has to stop
        self.topics = TopicParticipation(self)
        self.topics.start()  # refuses to start with a mismatched topic layout

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
        # The worker's own transactions last milliseconds; one left idle as long as
        # a lease is a frozen worker's, and the server ends it (see db.py).
        limit_idle_transactions(self.using, self.backend.later.lease_seconds)
        services = Services(self)
        listener = None
        watcher = None
        if self.backend_vendor() == "postgresql":
            listener = PostgresListener(
                self.using, self.namespace, self.wake, on_cancel=services.look_for_cancels
            )
            listener.start()
            # Outcomes are stored on a connection of their own, so the server writes
            # one batch's outcomes while the next batch is claimed. SQLite has one
            # writer at a time: there the loop stores them itself.
            self.outcomes.start_thread()
        else:
            use_wal(self.using)
            watcher = SqliteWatcher(self.using)
        services.start()
        for number in range(self.config.concurrency):
            self.add_slot(number)
        began = time.monotonic()
        try:
            self._loop(watcher)
        finally:
            for _ in self.slots:
                self.inbox.put(None)
            self.outcomes.stop()
            services.stop()
            if listener is not None:
                listener.stop()
            self._flush_metrics()
            limit_idle_transactions(self.using, None)
            self.seconds = time.monotonic() - began
            logger.info(
                "worker stopped id=%s claimed=%s succeeded=%s failed=%s retried=%s released=%s "
                "cancelled=%s fenced=%s seconds=%.1f",
                self.id,
                self.claimed_total,
                self.counts[SUCCESS],
                self.counts[FAILED],
                self.counts[RETRY],
                self.counts[RELEASE],
                self.counts[CANCELLED],
                self.counts["fenced"],
                self.seconds,
            )
        return 0

    def backend_vendor(self) -> str:
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
            if not self.outcomes.threaded:
                self.outcomes.collect()
            timeouts.check(self)
            if self.stop_requested.is_set():
                handback.release_unstarted(self)
                if self._settled():
                    return
                if time.monotonic() >= self.drain_deadline:
                    handback.release_running(self)
                    self.outcomes.store_now()
                    return
                idle_wait(self.wake, 0.05, None)
                continue
            handback.hand_back_held(self)
            if time.monotonic() < self.outage.resume_at:
                idle_wait(self.wake, self.outage.resume_at - time.monotonic(), None)
                continue
            limit = self.config.max_jobs
            if limit is not None and self.claimed_total >= limit:
                if self._settled():
                    return
                idle_wait(self.wake, poll, None)
                continue
            # The reserve waits in the inbox beyond the busy slots, so slots never
            # idle between the end of a job and the next claim. The next batch is
            # claimed once there is room for it whole: a claim costs about the
            # same for one job as for a full batch.
            with self.lock:
                free = self._free()
            wanted = max(1, min(self.reserve, BATCH))
            if limit is not None:
                free = min(free, limit - self.claimed_total)
                wanted = min(wanted, limit - self.claimed_total)
            with self.lock:
                self.claim_at = wanted
            can_claim = free >= wanted
            # A burst worker ends only after a claim that began with every job ended and
            # stored finds nothing: an outcome stored while the claim looked can have made
            # a partition's next job runnable, which the checks before exiting do not see.
            settled = self.config.burst and self._settled()
            try:
                claimed: list[Claimed] = []
                more = False
                if can_claim:
                    claimed, more = self._claim(free)
                    self.outage.claim_went_through()
                if time.monotonic() >= self.unheld_at:
                    found = self._take_unheld()
                    claimed += found
                    more = more or bool(found)
                if more:
                    continue
                if settled and not claimed:
                    if self._more_to_do():
                        continue
                    return
            except DatabaseError as e:
                self._database_trouble(e)
                continue
            with self.lock:
                wait = self._until_a_check(poll if can_claim else 1.0)
                self.waiting_until = time.monotonic() + wait
            idle_wait(self.wake, wait, watcher if can_claim else None)
            with self.lock:
                self.waiting_until = math.inf

    def _database_trouble(self, error: DatabaseError) -> None:
        """A claim failed for good: keep running, and try again after a growing pause."""
        self.outage.claim_failed(error)
        # The next claim opens a fresh connection; closing a broken one may raise,
        # and Django forgets it all the same.
        with contextlib.suppress(DatabaseError):
            connections[self.using].close()
        self.unheld_at = 0.0  # the failed claim may have committed: look once it is back

    def _more_to_do(self) -> bool:
        """Before a burst worker exits: promote what is due, then look for anything runnable.

        The maintenance thread promotes too, and a command it has just queued can
        postdate the claim that found nothing; so wait for its promotion, then look.
        """
        from ..engine.claiming import runnable
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
            return not self.running and self.outcomes.unstored == 0

    def _claim_queue(self, free: int) -> Claims:
        claimed = retrying(
            lambda: claim(
                self.namespace,
                self.id,
                queues=self.config.queues,
                free=free,
                lease_seconds=self.backend.later.lease_seconds,
                using=self.using,
                lazy=True,  # the slots decode records, not the claiming thread
            ),
            what="claim",
            using=self.using,
        )
        # Handed to the slots at once, so they start while partition heads are looked for.
        self._take(claimed)
        self.queue_claims = claimed
        return claimed

    def _claim(self, free: int) -> tuple[list[Claimed], bool]:
        """Claim up to ``free`` jobs and hand them to the slots; and whether claiming again
        at once may find more: only when the delivery queue's claim said so, or partition
        heads were taken (whose claim does not tell)."""
        self.queue_claims = None
        claimed = self.topics.claim(free, self._claim_queue)  # heads and commands in turns
        queue, self.queue_claims = self.queue_claims, None
        if queue is None:  # the queue's step did not run, or failed after the heads' step
            self._take(claimed)
            return claimed, True
        if len(claimed) > len(queue):
            taken = {item.job_id for item in queue}
            self._take([item for item in claimed if item.job_id not in taken])
            return claimed, True
        return claimed, queue.left_over

    def _take_unheld(self) -> list[Claimed]:
        """Run the jobs leased to this worker that it does not hold (see ``unheld``).

        Looked for once per renewal interval, and at once when a claim failed: a
        claim can commit although its answer never arrived. Only this thread
        claims, so every job claimed so far is in ``running`` or has an outcome
        the writer has not stored yet.
        """
        self.unheld_at = self._next_unheld_look()
        with self.lock:
            held = set(self.running) | set(self.outcomes.unstored_ids)
        found = retrying(
            lambda: unheld(self.namespace, self.id, held, using=self.using),
            what="unheld jobs",
            using=self.using,
        )
        plain = {item.job_id for item in found}
        found += [head for head in self.topics.unheld(held) if head.job_id not in plain]
        if found:
            logger.warning(
                "%s job(s) leased to this worker by a claim whose answer was lost; running "
                "them now ids=%s",
                len(found),
                ",".join(item.job_id for item in found),
            )
            self._take(found)
        return found

    def _next_unheld_look(self) -> float:
        return time.monotonic() + renewal_interval(
            later_settings.heartbeat_interval, self.backend.later.lease_seconds
        )

    def _take(self, claimed: list[Claimed]) -> None:
        """Hand claimed jobs to the slots."""
        if not claimed:
            return
        now = timezone.now()
        self.claimed_total += len(claimed)
        self.metrics.transition(Stage.RUNNING, now, len(claimed))
        waited: Counter[tuple[str, int]] = Counter(
            (wait_mode(item), wait_bin((now - item.available_at).total_seconds() * 1000))
            for item in claimed
        )
        self.metrics.waits(waited, now)
        started = time.monotonic()
        with self.lock:
            for item in claimed:
                # The deadline is set when a slot starts the job.
                self.running[item.job_id] = Running(item=item, started=started)
        for item in claimed:
            logger.debug("job claimed id=%s epoch=%s", item.job_id, item.epoch)
            self.inbox.put(item)

    # -- slots -------------------------------------------------------------------------------

    def add_slot(self, number: int) -> None:
        slot = Slot(number, self.inbox, self._execute, self._slot_done)
        self.slots.append(slot)
        slot.start()

    def _execute(self, item: Claimed) -> Outcome:
        item.load()
        with self.lock:
            running = self.running.get(item.job_id)
            if running is not None:
                running.slot = threading.current_thread()  # type: ignore[assignment]  # a Slot
                running.started = time.monotonic()
                running.deadline = deadline_for(item, timeouts.INTERRUPT_GRACE)
                if running.deadline is not None and running.deadline < self.waiting_until:
                    self.wake.set()  # the main loop's wait would outlast this deadline
        try:
            return execute(item, self.backend, self.id)
        except BaseException as e:  # a signal receiver's, or an interrupt that landed late
            # Signals reach the main thread only, so nothing raised here is a request to
            # stop the worker; a slot that let it through would die with the job running.
            logger.exception("job id=%s failed outside its task", item.job_id)
            return failed_outcome(item, e, self.id)

    def _free(self) -> int:
        """Room for claimed jobs: busy slots plus the reserve, less what is held or unstored."""
        held = len(self.running) + max(0, self.outcomes.unstored - WRITER_SLACK)
        return self.config.concurrency + self.reserve - held

    def _timed(self, seconds: float) -> None:
        """Fold a job's run time into the average and size the reserve by it (under lock)."""
        if self.job_seconds is None:
            self.job_seconds = seconds
        else:
            self.job_seconds += JOB_TIME_WEIGHT * (seconds - self.job_seconds)
        self.size_reserve()

    def size_reserve(self) -> None:
        """The jobs the slots start within HOLD_SECONDS, by the average job time (under lock)."""
        assert self.job_seconds is not None
        wanted = self.config.concurrency * HOLD_SECONDS / max(self.job_seconds, 1e-6)
        self.reserve = min(MAX_RESERVE, math.floor(wanted))

    def _slot_done(self, slot: Slot, item: Claimed, outcome: Outcome) -> None:
        with self.lock:
            running = self.running.pop(item.job_id, None)
            if running is None:
                return  # already settled (timed out and abandoned, or released)
            self._timed(time.monotonic() - running.started)
            self.outcomes.emit(outcome)
            # Wake the main loop only when it has something to do: claim a batch,
            # settle, or (without a writer thread) store the outcome itself. A wake
            # for every finished job costs a loop turn that mostly finds no room.
            free = self._free()
            needed = (
                not self.outcomes.threaded
                or free >= self.claim_at
                or not self.running
                or self.stop_requested.is_set()
            )
        if needed:
            self.wake.set()

    def _until_a_check(self, longest: float) -> float:
        """Seconds the main loop may wait (at most ``longest``) before a running job's
        timeout, the end of its cancel's grace, its grace after the interrupt, or a held
        job's hand-back falls due, so each is acted on at its time (under lock)."""
        now = time.monotonic()
        soonest = longest
        oldest_held = math.inf
        for running in self.running.values():
            if running.slot is None:
                oldest_held = min(oldest_held, running.started)  # claimed, waiting for a slot
            elif (at := running.step_at(timeouts.INTERRUPT_GRACE, self.cancel_grace)) is not None:
                soonest = min(soonest, at - now)
        if oldest_held < math.inf:
            at = max(
                oldest_held + handback.HELD_TOO_LONG,
                self.held_checked_at + handback.HELD_CHECK_EVERY,
            )
            soonest = min(soonest, at - now)
        return max(soonest, CHECK_SLACK)

    # -- metrics ---------------------------------------------------------------------------

    def _flush_metrics(self) -> None:
        try:
            self.metrics.flush(self.namespace, using=self.using)
        except Exception:
            logger.exception("could not store metrics")
