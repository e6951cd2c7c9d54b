"""``LaterCollector``: figures of each configured namespace, read when Prometheus scrapes.

Every read is one the dashboard already makes and is bounded whatever the
queue length: stage counters, the old end of the jobs-by-stage index, the
per-minute metric buckets of the last hour, the heartbeat rows, partition
heads and sequences, and consumer offsets. Nothing counts the jobs table.

The transition and wait buckets are trimmed after two days, so a sum over them
would fall now and then and Prometheus would take each fall for a counter
reset; they are exposed as gauges over fixed windows instead (the last
complete minute, the last hour), the same figures the dashboard shows.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import datetime

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from ..counts import oldest_in_stage
from ..dashboard import overview, topics
from ..dashboard.scope import Scope, configured_scopes
from ..states import Stage
from ..worker.metrics import OPEN_BIN_MS

# Workers beyond this many (the most recently heard-from first) are left out.
WORKER_LIMIT = 1000
QUANTILES = (("0.5", "median_ms"), ("0.95", "p95_ms"))
WINDOWS = {"last minute": "minute", "last hour": "hour"}

# What a partition is doing, as the topics page names it (not job stages).
PARTITION_STATES = ("idle", "ready", "running", "leased", "blocked")


class Families:
    """The metric families of one scrape, each filled with every namespace's samples."""

    def __init__(self) -> None:
        def gauge(name: str, doc: str, *labels: str) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, doc, labels=["namespace", *labels])

        self.jobs = gauge("later_jobs", "Jobs in each stage (exact counters).", "stage")
        self.oldest = gauge(
            "later_oldest_enqueued_job_age_seconds",
            "Seconds the longest-waiting enqueued job has waited to be claimed (0 when none).",
        )
        self.minute = gauge(
            "later_job_transitions_last_minute",
            "Jobs that entered each stage during the last complete minute.",
            "stage",
        )
        self.hour = gauge(
            "later_job_transitions_last_hour",
            "Jobs that entered each stage during the last hour and the current minute.",
            "stage",
        )
        self.wait = gauge(
            "later_queue_wait_seconds",
            "Queue wait (due time to start) at a quantile, as the upper bound of its "
            "histogram bin; absent while no job started in the window.",
            "mode",
            "window",
            "quantile",
        )
        self.waits = gauge(
            "later_queue_wait_samples",
            "Jobs started in the window, whose queue waits the quantiles describe.",
            "mode",
            "window",
        )
        self.alive = gauge(
            "later_workers_alive", "Workers heard from within LATER_WORKER_DEAD_AFTER."
        )
        self.slots = gauge("later_worker_slots", "Job slots (concurrency) of the live workers.")
        self.busy = gauge("later_worker_busy_slots", "Jobs the live workers are running.")
        self.partitions = gauge(
            "later_topic_partitions",
            "Partitions of each topic by state: idle, ready, running, leased or blocked.",
            "topic",
            "state",
        )
        self.lag = gauge("later_topic_lag", "Jobs queued in a topic's partitions.", "topic")
        self.lag_max = gauge(
            "later_topic_partition_lag_max",
            "Jobs queued in the topic's partition with the most.",
            "topic",
        )
        self.consumer_lag = gauge(
            "later_log_consumer_lag",
            "Retained-log records a consumer group has not yet committed, over a topic's "
            "partitions.",
            "group",
            "topic",
        )

    def __iter__(self) -> Iterator[Metric]:
        return iter(vars(self).values())


def _seconds(le_ms: int | None) -> float | None:
    if le_ms is None:
        return None
    return math.inf if le_ms >= OPEN_BIN_MS else le_ms / 1000


def _jobs(f: Families, scope: Scope, now: datetime) -> None:
    ns = scope.namespace
    for stage, count in overview.stage_counts(scope).items():
        f.jobs.add_metric([ns, stage], count)
    since = oldest_in_stage(ns, Stage.ENQUEUED, using=scope.database)
    f.oldest.add_metric([ns], 0.0 if since is None else max((now - since).total_seconds(), 0.0))
    for rate in overview.throughput(scope, now):
        f.minute.add_metric([ns, rate.stage], rate.last_minute)
        f.hour.add_metric([ns, rate.stage], rate.last_hour)
    for figures in overview.wait_figures(scope, now):
        window = WINDOWS[figures.window]
        f.waits.add_metric([ns, figures.mode, window], figures.samples)
        for quantile, attr in QUANTILES:
            value = _seconds(getattr(figures, attr))
            if value is not None:
                f.wait.add_metric([ns, figures.mode, window, quantile], value)


def _workers(f: Families, scope: Scope, now: datetime) -> None:
    live = [w for w in overview.workers(scope, now, limit=WORKER_LIMIT) if w.alive]
    f.alive.add_metric([scope.namespace], len(live))
    f.slots.add_metric([scope.namespace], sum(w.concurrency for w in live))
    f.busy.add_metric([scope.namespace], sum(w.running for w in live))


def _topics(f: Families, scope: Scope, now: datetime) -> None:
    ns = scope.namespace
    summaries, _ = topics.topics(scope, now)
    for summary in summaries:
        found = topics.topic(scope, summary.name)
        if found is None:
            continue
        states: dict[str, int] = dict.fromkeys(PARTITION_STATES, 0)
        lags = []
        for start in range(0, found.partition_count, topics.PARTITION_PAGE):
            for row in topics.partitions(scope, found, start, now, count_lag=False):
                states[row.state] = states.get(row.state, 0) + 1
                if row.head_sequence is not None and row.next_sequence is not None:
                    # Every sequence from the head on is still queued: rows behind a
                    # head are the only ones removed.
                    lags.append(max(row.next_sequence - row.head_sequence, 0))
        for state, count in states.items():
            f.partitions.add_metric([ns, found.name, state], count)
        f.lag.add_metric([ns, found.name], sum(lags))
        f.lag_max.add_metric([ns, found.name], max(lags, default=0))
    groups, _ = topics.consumer_groups(scope, now)
    lag: dict[tuple[str, str], int] = defaultdict(int)
    for held in groups:
        lag[(held.group, held.topic)] += held.lag
    for (group, topic_name), value in sorted(lag.items()):
        f.consumer_lag.add_metric([ns, group, topic_name], value)


class LaterCollector(Collector):
    """Yields the later figures of ``scopes`` (every configured namespace by default)."""

    def __init__(self, scopes: Sequence[Scope] | None = None) -> None:
        self.scopes = scopes

    def collect(self) -> Iterator[Metric]:
        families = Families()
        now = timezone.now()
        for scope in self.scopes if self.scopes is not None else configured_scopes():
            _jobs(families, scope, now)
            _workers(families, scope, now)
            _topics(families, scope, now)
        yield from families
