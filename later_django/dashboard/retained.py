"""Reads behind the retained-log parts of the topic pages: each partition's end, its
slowest group, the lag behind it, and how far workers have compacted it."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count, Min

from ..backend import LaterBackend
from ..log.compaction import compacted_to
from ..models import LogConsumerOffset, LogPartition
from ..options import LogPolicy
from .scope import Scope


@dataclass
class LogRow:
    """One retained-log partition of a topic: its end, its slowest group, how far it is kept."""

    partition: int
    end: int
    boundary: int | None  # the slowest group's committed offset; None when no group committed
    groups: int
    compacted_to: int | None  # None for a topic without compaction

    @property
    def lag(self) -> int | None:
        return None if self.boundary is None else max(self.end - self.boundary, 0)


def log_partitions(scope: Scope, topic_name: str, numbers: range) -> list[LogRow]:
    """The retained-log state of ``numbers`` (one page) of a topic: partitions with records
    appended or offsets committed. Three statements, whatever the log's length."""
    db, ns = scope.database, scope.namespace
    where = {"namespace": ns, "topic": topic_name, "partition__in": list(numbers)}
    ends = dict(
        LogPartition.objects.using(db).filter(**where).values_list("partition", "next_offset")
    )
    committed = {
        row["partition"]: (row["boundary"], row["groups"])
        for row in LogConsumerOffset.objects.using(db)
        .filter(**where)
        .values("partition")
        .annotate(boundary=Min("next_offset"), groups=Count("id"))
    }
    shown = sorted(set(ends) | set(committed))
    policy = _backend_for(scope).later.log_upkeep.get(topic_name)
    done = (
        compacted_to(_backend_for(scope).later, topic_name, shown)
        if policy is not None and policy.compact
        else {}
    )
    return [
        LogRow(
            partition=p,
            end=ends.get(p, 0),
            boundary=committed[p][0] if p in committed else None,
            groups=committed[p][1] if p in committed else 0,
            compacted_to=done.get(p),
        )
        for p in shown
    ]


def log_policy(scope: Scope, topic_name: str) -> LogPolicy | None:
    """The upkeep policy workers follow for a topic's retained log, if it has one."""
    return _backend_for(scope).later.log_upkeep.get(topic_name)


def _backend_for(scope: Scope) -> LaterBackend:
    from ..jobs import backend_for

    return backend_for(scope.namespace)


def describe(policy: LogPolicy | None) -> str:
    """What workers do to a topic's retained log, in a sentence."""
    if policy is None:
        return (
            "No upkeep policy: workers keep every record; compact() and cleanup() remove "
            "records only when called (see the topic's log_compact and log_retention options)."
        )
    parts = []
    if policy.compact:
        parts.append("keep only the newest record of each key")
    if policy.retention_seconds is not None:
        parts.append(f"delete records older than {_duration(policy.retention_seconds)}")
    return f"Workers {' and '.join(parts)}, below the offset of the slowest group only."


def _duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"
