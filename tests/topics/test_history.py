"""Bounded history per partition: only the newest keep_last finished jobs of each stay."""

from collections import Counter

import pytest
from django.db.models import Count

from later_django.counts import stage_counts
from later_django.engine.outcomes import FAILED
from later_django.jobs import cancel_job
from later_django.models import JobIndexRow, StorageValue
from later_django.records import job_key
from later_django.topics import history
from tests.conftest import wait_for
from tests.topics import tasks

from .helpers import claim, finish, keys_in_distinct_partitions

pytestmark = pytest.mark.django_db(transaction=True)


def run_all(owner: str = "worker-a", *, fail_every: int = 0) -> list[str]:
    """Claim and finish heads until none is left; return the finished job ids in order."""
    done, n = [], 0
    while items := claim(owner):
        for item in items:
            n += 1
            finish(owner, item, FAILED if fail_every and n % fail_every == 0 else "success")
            done.append(item.job_id)
    return done


def jobs_of(key_job_ids: list[str]) -> list[str]:
    return list(
        JobIndexRow.objects.filter(job_id__in=key_job_ids)
        .order_by("sequence")
        .values_list("job_id", flat=True)
    )


def assert_counts_exact() -> None:
    live = Counter(
        dict(
            JobIndexRow.objects.filter(namespace="tests")
            .values_list("stage")
            .annotate(n=Count("id"))
            .values_list("stage", "n")
        )
    )
    counts = stage_counts("tests")
    assert {s: n for s, n in counts.items() if n} == dict(live)


def test_only_the_newest_keep_last_finished_jobs_of_a_partition_stay():
    a, b = keys_in_distinct_partitions(2)
    ids = [tasks.step.using(partition_key=a).enqueue(a, n).id for n in range(30)]
    others = [tasks.step.using(partition_key=b).enqueue(b, n).id for n in range(5)]
    events = [tasks.event.using(partition_key=a).enqueue(a, n).id for n in range(15)]
    finished = run_all(fail_every=7)
    assert set(ids) | set(others) | set(events) == set(finished)
    waiting = [tasks.step.using(partition_key=a).enqueue(a, n).id for n in range(3)]
    cancel_job(waiting[0], namespace="tests")  # finished, and newer than all 30

    deleted, after = history.trim("tests", {"orders": 10}, None, batch=1000, using="default")

    assert (deleted, after) == (21, None)
    kept = ids[-9:] + waiting
    assert jobs_of(ids + waiting) == kept
    assert set(
        JobIndexRow.objects.filter(job_id__in=others + events).values_list("job_id", flat=True)
    ) == set(others + events)
    stored = set(StorageValue.objects.filter(namespace="tests").values_list("key", flat=True))
    assert {job_key(i) for i in kept + others + events} <= stored
    assert not {job_key(i) for i in ids[:21]} & stored
    assert list(
        JobIndexRow.objects.filter(job_id__in=waiting[1:]).values_list("stage", flat=True)
    ) == ["enqueued", "enqueued"]
    assert_counts_exact()
    assert history.trim("tests", {"orders": 10}, None, batch=1000, using="default") == (0, None)


def test_a_turn_deletes_at_most_a_batch_per_partition_and_visits_a_bounded_number():
    for key in keys_in_distinct_partitions(3):
        for n in range(6):
            tasks.step.using(partition_key=key).enqueue(key, n)
    run_all()
    partitions = sorted(
        set(JobIndexRow.objects.filter(topic="orders").values_list("partition", flat=True))
    )
    assert len(partitions) == 3

    deleted, after = history.trim("tests", {"orders": 2}, None, batch=3, using="default", limit=2)
    assert (deleted, after) == (6, ("orders", partitions[1]))
    deleted, after = history.trim("tests", {"orders": 2}, after, batch=3, using="default", limit=2)
    assert (deleted, after) == (3, None)
    deleted, after = history.trim("tests", {"orders": 2}, None, batch=3, using="default")
    assert (deleted, after) == (3, None)
    per_partition = Counter(JobIndexRow.objects.values_list("partition", flat=True))
    assert per_partition == dict.fromkeys(partitions, 2)
    assert_counts_exact()


def test_a_worker_keeps_the_newest_ten_of_thirty_jobs_on_one_key(start_worker):
    a, b, c = keys_in_distinct_partitions(3)
    ids = [tasks.step.using(partition_key=a).enqueue(a, n).id for n in range(30)]
    others = [tasks.step.using(partition_key=b).enqueue(b, n).id for n in range(12)]
    cancelled = tasks.step.using(partition_key=c).enqueue(c, 0)
    cancel_job(cancelled.id, namespace="tests")
    start_worker(LATER_TEST_KEEP_LAST="10", LATER_TEST_SWEEP_INTERVAL="0.2")

    def trimmed() -> bool:
        """The first 20 jobs of key a and 2 of key b are gone, and every other job ran."""
        left = set(JobIndexRow.objects.values_list("job_id", "stage"))
        return {j for j, _ in left} == set(ids[20:] + others[2:] + [cancelled.id]) and all(
            s in ("success", "cancelled") for _, s in left
        )

    wait_for(trimmed)
    stored = set(StorageValue.objects.filter(namespace="tests").values_list("key", flat=True))
    assert {job_key(i) for i in ids[:20] + others[:2]}.isdisjoint(stored)
    assert {job_key(i) for i in ids[20:] + others[2:] + [cancelled.id]} <= stored
    assert_counts_exact()
