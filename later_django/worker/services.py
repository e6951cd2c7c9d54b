"""A worker's background threads: lease renewal with heartbeats, and maintenance duties.

Leases are renewed every ``LATER_HEARTBEAT_INTERVAL``, or every third of the
backend's ``lease_seconds`` when that is shorter, so no lease lapses while its
worker is alive. Each heartbeat also looks for cancels of the jobs the worker
holds (``cancels.deliver``); on PostgreSQL a ``later_cancel`` notification
pokes the heartbeat thread to look at once.

Both are safe to stop twice or before they start. A duty that fails is logged
and tried again at its next turn; it never stops the worker.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from django.db import DatabaseError, connections
from django.utils import timezone

from .. import counts
from ..conf import later_settings, renewal_interval
from ..db import is_transient, limit_idle_transactions, retrying
from ..log import upkeep as log_upkeep
from ..schedules import ticking as schedules
from . import cancels, leases, maintenance

if TYPE_CHECKING:
    from .runner import Worker

logger = logging.getLogger(__name__)

RECONCILE_INTERVAL = 3600.0
RECONCILE_RETRY = 60.0
METRICS_INTERVAL = 1.0
# How often the worker looks for hot tables that outgrew their planner statistics:
# one catalog read (about half a millisecond); it ANALYZEs only what has grown.
STATISTICS_INTERVAL = 1.0
# A maintenance turn meant for a schedule's time starts this much after it, so
# that the clock has passed it when the turn looks (the wait is on another clock).
SCHEDULE_SLACK = 0.002


class FailureRun:
    """Failures in a row of an action tried again and again, logged without a flood.

    The first is logged with its traceback and each further one as a line, so
    a database outage does not print a traceback at every try.
    """

    def __init__(self, log: logging.Logger) -> None:
        self.log = log
        self.count = 0

    def failed(self, error: BaseException, first: str, again: str) -> None:
        """Log a failure; call it from the ``except`` block that caught ``error``."""
        self.count += 1
        if self.count == 1:
            self.log.exception(first)
        else:
            self.log.warning("%s (%s in a row) error=%s", again, self.count, error)

    def ended(self) -> int:
        """After a success: how many failures came before it (0 when none), starting afresh."""
        count, self.count = self.count, 0
        return count


class Periodic(threading.Thread):
    """Runs ``tick`` every ``interval`` seconds until stopped."""

    def __init__(
        self,
        name: str,
        interval: Callable[[], float],
        tick: Callable[[], None],
        *,
        using: str = "default",
        idle_limit: float | None = None,
    ) -> None:
        super().__init__(name=name, daemon=True)
        self.interval = interval
        self.tick = tick
        self.using = using
        self.idle_limit = idle_limit
        self.stopping = threading.Event()
        self.poked = threading.Event()  # run the next tick now

    def run(self) -> None:
        failures = FailureRun(logger)
        if self.idle_limit is not None:
            limit_idle_transactions(self.using, self.idle_limit)
        try:
            while not self.stopping.is_set():
                try:
                    self.tick()
                except Exception as e:  # noqa: BLE001  (FailureRun logs it, traceback first)
                    failures.failed(
                        e,
                        f"{self.name} failed; trying again in {self.interval()}s",
                        f"{self.name} failed again",
                    )
                else:
                    if count := failures.ended():
                        logger.warning("%s works again after %s failures", self.name, count)
                self.poked.wait(self.interval())
                self.poked.clear()
        finally:
            connections[self.using].close()

    def poke(self) -> None:
        """Run the next tick at once rather than at the end of the interval."""
        self.poked.set()

    def stop(self) -> None:
        self.stopping.set()
        self.poked.set()
        if self.is_alive():
            self.join(timeout=10)


class Services:
    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.threads: list[Periodic] = []
        self.last: dict[str, float] = {}
        self.next_schedule_at: float | None = None  # monotonic; set by the maintenance thread
        self.log_after: tuple[str, int] | None = None  # where the last log upkeep turn stopped

    def start(self) -> None:
        if self.threads:
            return
        w = self.worker
        retrying(lambda: schedules.sync_declared(w.backend), what="schedule sync", using=w.using)
        # Before the first claim: a queue filled just before the worker started (a
        # backlog at a deploy) would be claimed from without planner statistics until
        # the maintenance thread's first turn came to them.
        try:
            self.refresh_statistics()
        except DatabaseError as e:  # the maintenance thread tries again
            logger.warning("planner statistics not refreshed at start error=%s", e)
        else:
            self.last["statistics"] = time.monotonic()  # not again at the first turn
        limit = w.backend.later.lease_seconds
        self.threads = [
            Periodic(
                "later-heartbeat",
                lambda: renewal_interval(later_settings.heartbeat_interval, limit),
                self.heartbeat,
                using=w.using,
                idle_limit=limit,
            ),
            Periodic(
                "later-maintenance",
                self.maintenance_wait,
                self.duties,
                using=w.using,
                idle_limit=limit,
            ),
        ]
        for thread in self.threads:
            thread.start()

    def stop(self) -> None:
        for thread in self.threads:
            thread.stop()
        if self.threads:
            try:
                leases.retire(self.worker.namespace, self.worker.id, using=self.worker.using)
            except Exception:
                logger.exception(
                    "could not remove the heartbeat row of worker id=%s", self.worker.id
                )
            finally:
                connections[self.worker.using].close()
        self.threads = []

    def heartbeat(self) -> None:
        w = self.worker
        retrying(
            lambda: leases.renew(
                w.namespace, w.id, lease_seconds=w.backend.later.lease_seconds, using=w.using
            ),
            what="lease renewal",
            using=w.using,
        )
        w.topics.heartbeat()  # leases of the partition heads this worker is running
        cancels.deliver(w, w.cancel_grace)  # flags the jobs whose cancel was requested
        retrying(
            lambda: leases.heartbeat(
                w.namespace,
                w.id,
                queues=w.config.queues or [],
                concurrency=w.config.concurrency,
                started=w.started_at,
                using=w.using,
            ),
            what="heartbeat",
            using=w.using,
        )
        if w.config.health_file:
            # Only after the row is written: a fresh file means the database took the beat.
            Path(w.config.health_file).touch()

    def look_for_cancels(self) -> None:
        """Have the heartbeat thread look for cancel requests now (a NOTIFY arrived)."""
        if self.threads:
            self.threads[0].poke()

    def maintenance_wait(self) -> float:
        """Seconds until the next maintenance turn: the poll interval (at most 1 s), or
        less when a schedule falls due sooner, so that it fires on time."""
        wait = min(later_settings.poll_interval, 1.0)
        if self.next_schedule_at is not None:
            until = self.next_schedule_at - time.monotonic() + SCHEDULE_SLACK
            wait = min(wait, max(until, 0.0))
        return wait

    def due(self, name: str, interval: float) -> bool:
        now = time.monotonic()
        if now - self.last.get(name, -1e18) < interval:
            return False
        self.last[name] = now
        return True

    def duties(self) -> None:
        w = self.worker
        ns, using = w.namespace, w.using
        if retrying(
            lambda: maintenance.promote_due(ns, using=using), what="promotion", using=using
        ):
            w.wake.set()
        if retrying(lambda: schedules.run_due(w.backend), what="schedules", using=using):
            w.wake.set()
        upcoming = retrying(lambda: schedules.next_due(w.backend), what="schedules", using=using)
        self.next_schedule_at = (
            None
            if upcoming is None
            else time.monotonic() + (upcoming - timezone.now()).total_seconds()
        )
        if self.due("metrics", METRICS_INTERVAL):
            w.metrics.flush(ns, using=using)
            retrying(lambda: counts.fold(using=using), what="fold stage counts", using=using)
        self.worker.topics.duties(self)  # truncation behind heads, healing headless partitions
        if self.due("statistics", STATISTICS_INTERVAL):
            self.refresh_statistics()
        if self.due("sample", 60.0):
            retrying(
                lambda: maintenance.record_queue_sample(ns, using=using),
                what="queue sample",
                using=using,
            )
        if self.due("reconcile", RECONCILE_INTERVAL):
            self.reconcile()
        if self.due("sweep", later_settings.sweep_interval):
            self.sweep()
        if w.backend.later.log_upkeep and self.due("log upkeep", later_settings.sweep_interval):
            self.keep_log()
        interval = later_settings.vacuum_interval
        if interval is not None and self.due("vacuum", interval):
            from ..storage import Storage

            Storage(ns, using=using).vacuum()

    def refresh_statistics(self) -> None:
        using = self.worker.using
        retrying(
            lambda: maintenance.refresh_statistics(using=using), what="statistics", using=using
        )

    def reconcile(self) -> None:
        """Recount the stage counters, or postpone it while the index is busy.

        Not retried at once: each try that waits for the index lock holds up every
        writer of the namespace meanwhile.
        """
        w = self.worker
        try:
            counts = maintenance.reconcile_stage_counts(w.namespace, using=w.using)
        except DatabaseError as e:
            if not is_transient(e):
                raise
            self.last["reconcile"] = time.monotonic() - RECONCILE_INTERVAL + RECONCILE_RETRY
            logger.info(
                "stage count recount postponed %ss namespace=%s error=%s",
                RECONCILE_RETRY,
                w.namespace,
                e,
            )
            return
        logger.debug("stage counts reconciled namespace=%s counts=%s", w.namespace, counts)

    def keep_log(self) -> None:
        """One bounded turn of retained-log compaction and cleanup; the next one runs at the
        next maintenance turn rather than the next sweep interval while work is left."""
        w = self.worker
        turn = retrying(
            lambda: log_upkeep.keep(
                w.backend.later,
                w.backend.later.log_upkeep,
                self.log_after,
                batch=later_settings.sweep_batch,
            ),
            what="log upkeep",
            using=w.using,
        )
        self.log_after = turn.after
        if turn.more:
            self.last.pop("log upkeep", None)
        if turn.compacted or turn.cleaned:
            logger.info(
                "retained log kept namespace=%s compacted=%s cleaned=%s",
                w.namespace,
                turn.compacted,
                turn.cleaned,
            )

    def sweep(self) -> None:
        from ..storage import Storage

        w = self.worker
        storage = Storage(w.namespace, using=w.using)
        batch = later_settings.sweep_batch
        removed = 0
        for _ in range(10):  # bounded work per turn; the next turn goes on
            n = retrying(lambda: storage.sweep_expired(batch), what="sweep", using=w.using)
            n += retrying(
                lambda: maintenance.sweep_jobs_index(w.namespace, limit=batch, using=w.using),
                what="sweep index",
                using=w.using,
            )
            removed += n
            if n < batch:
                break
        maintenance.trim_metrics(w.namespace, using=w.using)
        storage.checkpoint_wal()
        if removed:
            logger.info("swept expired rows namespace=%s removed=%s", w.namespace, removed)
