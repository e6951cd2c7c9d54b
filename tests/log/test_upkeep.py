"""Keeping the retained log: compaction's checkpoint, bounded turns, and a worker that does it.

The last test runs real ``later_worker`` processes with a log policy on the
topic "events" (``LATER_TEST_LOG_UPKEEP``): no call of compact() or cleanup().
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from later_django.log import append_many, compact, read
from later_django.log import upkeep as log_upkeep
from later_django.log.compaction import compacted_to
from later_django.models import LogConsumerOffset, LogRecord
from later_django.options import LogPolicy
from later_django.tasks_api import default_task_backend
from later_django.topics.routing import partition_for_key
from tests.conftest import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

PARTITION = partition_for_key("k", 4)


def commit(group: str, partition: int, next_offset: int) -> None:
    LogConsumerOffset.objects.update_or_create(
        namespace="tests",
        group=group,
        topic="events",
        partition=partition,
        defaults={"next_offset": next_offset, "updated_at": timezone.now()},
    )


def payloads(partition: int = PARTITION) -> list[bytes]:
    return [r.payload for r in read("events", partition, limit=1000)]


def test_compaction_goes_on_from_its_checkpoint_as_groups_move_on():
    append_many("events", [("k", b"v1"), ("k", b"v2"), ("k", b"v3")])
    commit("billing", PARTITION, 2)
    assert compact("events") == 2  # v1 and v2: below the boundary, and replaced by v3
    assert compacted_to(default_task_backend.later, "events", [PARTITION]) == {PARTITION: 2}
    assert compact("events") == 0  # nothing new below the boundary
    append_many("events", [("k", b"v4")])
    commit("billing", PARTITION, 10)
    assert compact("events") == 1  # v3, which v4 replaces though it lies below the checkpoint
    assert payloads() == [b"v4"]


def test_a_compaction_step_takes_at_most_its_limit_of_records():
    append_many("events", [("k", f"v{i}".encode()) for i in range(10)])
    commit("billing", PARTITION, 10)
    assert compact("events", limit=4) == 4  # the step [0, 4): each has a newer record
    assert compacted_to(default_task_backend.later, "events", [PARTITION]) == {PARTITION: 4}
    assert compact("events", limit=4) == 4
    assert compact("events", limit=4) == 1  # [8, 10): v8; v9 is the newest and stays
    assert payloads() == [b"v9"]


def test_a_turn_visits_a_bounded_number_of_partitions_and_resumes_after_the_last(monkeypatch):
    monkeypatch.setattr(log_upkeep, "PARTITIONS_PER_TURN", 2)
    keys = {}
    n = 0
    while len(keys) < 4:
        keys.setdefault(partition_for_key(f"key-{n}", 4), f"key-{n}")
        n += 1
    for partition, key in keys.items():
        append_many("events", [(key, b"old"), (key, b"new")])
        commit("billing", partition, 2)
    policies = {"events": LogPolicy(compact=True)}
    first = log_upkeep.keep(default_task_backend.later, policies, None, batch=100)
    assert (first.compacted, first.after, first.more) == (2, ("events", 1), True)
    second = log_upkeep.keep(default_task_backend.later, policies, first.after, batch=100)
    assert (second.compacted, second.more) == (2, False)
    assert second.after is None  # every partition seen: the next turn starts again
    assert LogRecord.objects.count() == 4


def test_a_worker_compacts_and_cleans_the_log_of_a_topic_with_a_policy(start_worker):
    # The keyless record goes to a random partition; first, so that wherever it lands
    # it sits below both groups' offsets (on PARTITION, at offset 0, before v1..v3).
    append_many("events", [(None, b"keyless"), ("k", b"v1"), ("k", b"v2"), ("k", b"v3")])
    keyless = LogRecord.objects.get(payload=b"keyless")
    # Old enough for the topic's log_retention of an hour, and consumed by every group.
    LogRecord.objects.filter(id=keyless.id).update(appended_at=timezone.now() - timedelta(hours=2))
    for partition in range(4):
        commit("billing", partition, 10)
    commit("audit", PARTITION, 3)  # the slower group: v3 may not be behind it yet
    start_worker(LATER_TEST_LOG_UPKEEP="1", LATER_TEST_SWEEP_INTERVAL="0.2")

    def kept() -> bool:
        return set(LogRecord.objects.values_list("payload", flat=True)) == {b"v3"}

    wait_for(kept, timeout=30)
    assert payloads() == [b"v3"]
