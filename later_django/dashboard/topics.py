"""Reads behind the topic, partition and consumer-group views."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.conf import settings
from django.db import connections
from django.db.models import Count, Q
from django.utils import timezone

from ..models import (
    JobIndexRow,
    LogConsumerLease,
    LogConsumerOffset,
    LogPartition,
    PartitionHead,
    PartitionLease,
    PartitionSequence,
    Topic,
)
from ..states import Stage
from .scope import Scope

TOPIC_LIMIT = 200
PARTITION_PAGE = 64
LAG_CAP = 10_000
GROUP_ROW_LIMIT = 500


@dataclass
class TopicSummary:
    name: str
    partition_count: int
    created_at: datetime
    active: int = 0
    ready: int = 0
    leased: int = 0


def topics(scope: Scope, now: datetime) -> tuple[list[TopicSummary], bool]:
    """The namespace's topics with active, ready and leased partition counts."""
    found = list(
        Topic.objects.using(scope.database)
        .filter(namespace=scope.namespace)
        .order_by("name")[: TOPIC_LIMIT + 1]
    )
    summaries = {t.name: TopicSummary(t.name, t.partition_count, t.created_at) for t in found}
    names = list(summaries)[:TOPIC_LIMIT]
    heads = (
        PartitionHead.objects.using(scope.database)
        .filter(namespace=scope.namespace, topic__in=names)
        .values("topic")
        .annotate(active=Count("id"), ready=Count("id", filter=Q(available_at__lte=now)))
    )
    for row in heads:
        summaries[row["topic"]].active = row["active"]
        summaries[row["topic"]].ready = row["ready"]
    leases = (
        PartitionLease.objects.using(scope.database)
        .filter(namespace=scope.namespace, topic__in=names, expires_at__gt=now)
        .exclude(owner=None)
        .values("topic")
        .annotate(n=Count("id"))
    )
    for topic_name, count in leases.values_list("topic", "n"):
        summaries[topic_name].leased = count
    return [summaries[name] for name in names], len(found) > TOPIC_LIMIT


@dataclass
class PartitionRow:
    partition: int
    head_sequence: int | None = None
    head_job_id: str | None = None
    available_at: datetime | None = None
    next_sequence: int | None = None
    lag: int = 0
    lag_capped: bool = False
    owner: str | None = None
    epoch: int | None = None
    expires_at: datetime | None = None
    state: str = "idle"
    reason: str = ""
    blocked: bool = False
    head: JobIndexRow | None = field(default=None, repr=False)


def topic(scope: Scope, name: str) -> Topic | None:
    return Topic.objects.using(scope.database).filter(namespace=scope.namespace, name=name).first()


def partitions(
    scope: Scope, found: Topic, start: int, now: datetime, *, count_lag: bool = True
) -> list[PartitionRow]:
    """Partitions ``start`` .. ``start + PARTITION_PAGE - 1`` of a topic with their state.

    With ``count_lag`` false the rows' ``lag`` stays 0 and no queued rows are counted.
    """
    numbers = range(start, min(start + PARTITION_PAGE, found.partition_count))
    rows = {n: PartitionRow(n) for n in numbers}
    where = {"namespace": scope.namespace, "topic": found.name, "partition__in": list(numbers)}
    db = scope.database
    for head in PartitionHead.objects.using(db).filter(**where):
        row = rows[head.partition]
        row.head_sequence, row.head_job_id = head.sequence, head.job_id
        row.available_at = head.available_at
    for held in PartitionLease.objects.using(db).filter(**where):
        row = rows[held.partition]
        row.owner, row.epoch, row.expires_at = held.owner, held.epoch, held.expires_at
    for seq in PartitionSequence.objects.using(db).filter(**where):
        rows[seq.partition].next_sequence = seq.next_sequence
    head_ids = [r.head_job_id for r in rows.values() if r.head_job_id]
    head_rows = {
        j.job_id: j
        for j in JobIndexRow.objects.using(db).filter(
            namespace=scope.namespace, job_id__in=head_ids
        )
    }
    active = [r.partition for r in rows.values() if r.head_job_id and count_lag]
    for number, (lag, capped) in _lags(scope, found.name, active).items():
        rows[number].lag, rows[number].lag_capped = lag, capped
    for row in rows.values():
        row.head = head_rows.get(row.head_job_id or "")
        _describe(row, now)
    return list(rows.values())


def _lags(scope: Scope, topic_name: str, numbers: list[int]) -> dict[int, tuple[int, bool]]:
    """Queued rows per partition, each count stopping at ``LAG_CAP``, in one statement."""
    if not numbers:
        return {}
    part = (
        "SELECT %s, (SELECT COUNT(*) FROM (SELECT 1 FROM later_partition_job "
        'WHERE namespace = %s AND topic = %s AND "partition" = %s LIMIT %s) AS q)'
    )
    params: list[str | int] = []
    for number in numbers:
        params += [number, scope.namespace, topic_name, number, LAG_CAP + 1]
    with connections[scope.database].cursor() as cursor:
        cursor.execute(" UNION ALL ".join([part] * len(numbers)), params)
        return {
            int(number): (min(int(n), LAG_CAP), int(n) > LAG_CAP) for number, n in cursor.fetchall()
        }


def _describe(row: PartitionRow, now: datetime) -> None:
    """Set a partition's state and, when its head holds the rows behind it, why."""
    leased = row.owner is not None and row.expires_at is not None and row.expires_at > now
    head = row.head
    if row.head_job_id is None:
        row.state = "leased" if leased else "idle"
        return
    if head is not None and head.stage == Stage.DELAYED:
        row.state, row.blocked = "blocked", True
        row.reason = f"delayed head: due {_when(head.run_at)}"
    elif head is not None and head.stage == Stage.REQUEUED:
        row.state, row.blocked = "blocked", True
        row.reason = f"retrying head: attempt {head.attempts} failed, next try {_when(head.run_at)}"
    elif head is not None and head.stage == Stage.WAITING:
        row.state, row.blocked = "blocked", True
        row.reason = f"waiting head: for parent job {head.parent_job_id or '?'}"
    elif leased:
        row.state = "running"
    elif row.available_at is not None and row.available_at > now:
        row.state, row.blocked = "blocked", True
        row.reason = f"head not available until {_when(row.available_at)}"
    else:
        row.state = "ready"
        if row.owner is not None:
            row.reason = f"lease of {row.owner} lapsed; any worker may take it"


def _when(moment: datetime | None) -> str:
    if moment is None:
        return "unknown"
    if timezone.is_naive(moment):  # USE_TZ off: local time
        return f"{moment:%Y-%m-%d %H:%M:%S} {settings.TIME_ZONE}"
    return f"{moment.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


@dataclass
class GroupRow:
    group: str
    topic: str
    partition: int
    committed: int
    end: int
    lag: int
    owner: str | None
    epoch: int | None
    expires_at: datetime | None
    live: bool


def consumer_groups(
    scope: Scope, now: datetime, *, topic: str | None = None
) -> tuple[list[GroupRow], bool]:
    """Each retained-log group's committed offset, log end and lag per partition (of one
    ``topic``, if given)."""
    db, ns = scope.database, scope.namespace
    found = LogConsumerOffset.objects.using(db).filter(namespace=ns)
    if topic is not None:
        found = found.filter(topic=topic)
    offsets = list(found.order_by("group", "topic", "partition")[: GROUP_ROW_LIMIT + 1])
    shown = offsets[:GROUP_ROW_LIMIT]
    topics_seen = sorted({o.topic for o in shown})
    groups_seen = sorted({o.group for o in shown})
    ends = {
        (p.topic, p.partition): p.next_offset
        for p in LogPartition.objects.using(db).filter(namespace=ns, topic__in=topics_seen)
    }
    leases = {
        (le.group, le.topic, le.partition): le
        for le in LogConsumerLease.objects.using(db).filter(
            namespace=ns, group__in=groups_seen, topic__in=topics_seen
        )
    }
    rows = []
    for o in shown:
        end = ends.get((o.topic, o.partition), o.next_offset)
        held = leases.get((o.group, o.topic, o.partition))
        rows.append(
            GroupRow(
                group=o.group,
                topic=o.topic,
                partition=o.partition,
                committed=o.next_offset,
                end=end,
                lag=max(end - o.next_offset, 0),
                owner=held.owner if held else None,
                epoch=held.epoch if held else None,
                expires_at=held.expires_at if held else None,
                live=bool(held and held.owner and held.expires_at and held.expires_at > now),
            )
        )
    return rows, len(offsets) > GROUP_ROW_LIMIT
