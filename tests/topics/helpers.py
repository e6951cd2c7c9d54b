"""Driving the partition engine in-process: claim heads, store outcomes, move time."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from later_django import partition_for_key
from later_django.engine.outcomes import SUCCESS, Outcome, record_outcomes
from later_django.models import PartitionHead, PartitionLease
from later_django.topics.assignment import Preference
from later_django.topics.claiming import PartitionClaimed, claim_heads

from .conftest import ORDERS


def claim(
    owner: str, free: int = 8, preference: Preference | None = None
) -> list[PartitionClaimed]:
    return claim_heads(
        "tests",
        owner,
        free=free,
        lease_seconds=2,
        preference=preference or Preference(),
        queues=None,
        running=set(),
        using="default",
    )


def finish(owner: str, item: PartitionClaimed, kind: str = SUCCESS, retry_in: float | None = None):
    now = timezone.now()
    outcome = Outcome(
        item.job_id,
        item.epoch,
        kind,
        item.record,
        now,
        retry_at=now + timedelta(seconds=retry_in) if retry_in is not None else None,
    )
    return record_outcomes("tests", owner, [outcome], retention_seconds=60, using="default")


def lapse(topic: str = "orders") -> None:
    """Make every partition lease of ``topic`` lapse, as if its owner had stopped."""
    past = timezone.now() - timedelta(seconds=1)
    PartitionLease.objects.filter(topic=topic).update(expires_at=past)
    PartitionHead.objects.filter(topic=topic).update(available_at=past)


def keys_in_distinct_partitions(count: int) -> list[str]:
    keys, seen = [], set()
    n = 0
    while len(keys) < count:
        key = f"key-{n}"
        n += 1
        if partition_for_key(key, ORDERS) not in seen:
            seen.add(partition_for_key(key, ORDERS))
            keys.append(key)
    return keys
