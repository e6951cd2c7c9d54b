"""Reads behind the overview page; each is O(1) or bounded by a fixed number of buckets."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Count, Max, Q, Sum
from django.db.models.functions import TruncHour

from ..conf import later_settings
from ..counts import stage_counts as counted_stages
from ..models import (
    JobExecution,
    JobTransitionMetric,
    JobWaitMetric,
    QueueSample,
    Worker,
)
from ..states import Stage
from ..storage import Storage
from .scope import Scope

STAGES: tuple[str, ...] = tuple(Stage)
THROUGHPUT_STAGES: tuple[str, ...] = (
    Stage.ENQUEUED,
    Stage.RUNNING,
    Stage.SUCCESS,
    Stage.FAILED,
    Stage.REQUEUED,
    Stage.CANCELLED,
)
WORKER_LIMIT = 50
MINUTE = timedelta(minutes=1)
HOUR = timedelta(hours=1)
WEEK = timedelta(days=7)


def floor_minute(moment: datetime) -> datetime:
    return moment.replace(second=0, microsecond=0)


def stage_counts(scope: Scope) -> dict[str, int]:
    """Every stage's job count, from the trigger-kept counters (a few rows per stage)."""
    counts = dict.fromkeys(STAGES, 0)
    for stage, count in counted_stages(scope.namespace, using=scope.database).items():
        if stage in counts:
            counts[stage] = max(count, 0)
    return counts


@dataclass(frozen=True)
class Rate:
    stage: str
    last_minute: int
    last_hour: int


def throughput(scope: Scope, now: datetime) -> list[Rate]:
    """Transitions into each stage in the last complete minute and the last hour.

    "Last hour" is the sixty minute buckets before the current one plus the
    current, still filling, bucket.
    """
    current = floor_minute(now)
    previous = current - MINUTE
    sums = (
        JobTransitionMetric.objects.using(scope.database)
        .filter(namespace=scope.namespace, bucket__gte=current - HOUR)
        .values("stage")
        .annotate(
            hour=Sum("count"),
            minute=Sum("count", filter=Q(bucket__gte=previous, bucket__lt=current)),
        )
    )
    found: dict[str, tuple[int, int]] = {
        row["stage"]: (row["minute"] or 0, row["hour"] or 0) for row in sums
    }
    return [Rate(stage, *found.get(stage, (0, 0))) for stage in THROUGHPUT_STAGES]


@dataclass(frozen=True)
class WaitFigures:
    mode: str
    window: str
    samples: int
    median_ms: int | None
    p95_ms: int | None


def percentile(bins: list[tuple[int, int]], fraction: float) -> int | None:
    """The upper bound of the histogram bin holding the given fraction of samples."""
    total = sum(count for _, count in bins)
    if total <= 0:
        return None
    wanted = fraction * total
    seen = 0
    for le_ms, count in sorted(bins):
        seen += count
        if seen >= wanted:
            return le_ms
    return sorted(bins)[-1][0]


def wait_figures(scope: Scope, now: datetime) -> list[WaitFigures]:
    """Median and 95th percentile queue wait per mode, over the last minute and hour."""
    current = floor_minute(now)
    rows = (
        JobWaitMetric.objects.using(scope.database)
        .filter(namespace=scope.namespace, bucket__gte=current - HOUR)
        .values("mode", "le_ms")
        .annotate(
            hour=Sum("count"),
            minute=Sum("count", filter=Q(bucket__gte=current - MINUTE, bucket__lt=current)),
        )
    )
    bins: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for row in rows:
        bins.setdefault((row["mode"], "hour"), []).append((row["le_ms"], row["hour"] or 0))
        bins.setdefault((row["mode"], "minute"), []).append((row["le_ms"], row["minute"] or 0))
    modes = sorted({mode for mode, _ in bins}) or ["regular"]
    figures = []
    for mode in modes:
        for window, label in (("minute", "last minute"), ("hour", "last hour")):
            found = bins.get((mode, window), [])
            figures.append(
                WaitFigures(
                    mode=mode,
                    window=label,
                    samples=sum(count for _, count in found),
                    median_ms=percentile(found, 0.5),
                    p95_ms=percentile(found, 0.95),
                )
            )
    return figures


@dataclass(frozen=True)
class SamplePoint:
    at: datetime
    queued: int
    partitioned: int


def queue_week(scope: Scope, now: datetime) -> list[SamplePoint]:
    """The week's one-minute samples reduced to each hour's highest reading."""
    rows = (
        QueueSample.objects.using(scope.database)
        .filter(namespace=scope.namespace, minute__gte=now - WEEK)
        .annotate(hour=TruncHour("minute"))
        .values("hour")
        .annotate(queued=Max("queued"), partitioned=Max("partitioned"))
        .order_by("hour")
    )
    return [SamplePoint(r["hour"], r["queued"], r["partitioned"]) for r in rows]


def queue_hour(scope: Scope, now: datetime) -> list[SamplePoint]:
    """The last hour's one-minute samples, oldest first."""
    rows = (
        QueueSample.objects.using(scope.database)
        .filter(namespace=scope.namespace, minute__gte=now - HOUR)
        .order_by("minute")
        .values_list("minute", "queued", "partitioned")
    )
    return [SamplePoint(*row) for row in rows]


@dataclass(frozen=True)
class WorkerRow:
    worker_id: str
    hostname: str
    pid: int
    queues: list[str]
    concurrency: int
    started_at: datetime
    heartbeat_at: datetime
    alive: bool
    running: int


def workers(scope: Scope, now: datetime, limit: int = WORKER_LIMIT) -> list[WorkerRow]:
    """The most recently heard-from workers, each marked live or silent."""
    dead_before = now - timedelta(seconds=later_settings.worker_dead_after)
    rows = list(
        Worker.objects.using(scope.database)
        .filter(namespace=scope.namespace)
        .order_by("-heartbeat_at")[:limit]
    )
    running = dict(
        JobExecution.objects.using(scope.database)
        .filter(namespace=scope.namespace, owner__in=[w.worker_id for w in rows])
        .values("owner")
        .annotate(n=Count("id"))
        .values_list("owner", "n")
    )
    return [
        WorkerRow(
            worker_id=w.worker_id,
            hostname=w.hostname,
            pid=w.pid,
            queues=list(w.queues or []),
            concurrency=w.concurrency,
            started_at=w.started_at,
            heartbeat_at=w.heartbeat_at,
            alive=w.heartbeat_at > dead_before,
            running=running.get(w.worker_id, 0),
        )
        for w in rows
    ]


def database_size(scope: Scope) -> int:
    """The whole database's size in bytes (every table, not only Later's)."""
    return Storage(scope.namespace, using=scope.database).database_size()
