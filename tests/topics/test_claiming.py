"""Claiming heads and settling them: order, blocking, fencing, one transaction per step."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from later_django import partition_for_key
from later_django.engine.outcomes import FAILED, RETRY
from later_django.jobs import cancel_job
from later_django.models import JobIndexRow, PartitionHead, PartitionJob, PartitionLease, Worker
from later_django.topics.assignment import Assignment, Preference, partition_token, spread
from tests.topics import tasks

from .conftest import ORDERS
from .helpers import claim, finish, keys_in_distinct_partitions, lapse

pytestmark = pytest.mark.django_db


def enqueue(key: str, count: int = 1) -> list[str]:
    return [tasks.step.using(partition_key=key).enqueue(key, n).id for n in range(count)]


def stage(job_id: str) -> str:
    return JobIndexRow.objects.get(job_id=job_id).stage


def test_only_the_head_of_a_partition_is_claimed_and_the_rest_wait_for_it():
    ids = enqueue("a", 3)
    [item] = claim("worker-a")
    assert (item.job_id, item.sequence, item.epoch, item.topic) == (ids[0], 1, 1, "orders")
    assert stage(ids[0]) == "running"
    assert claim("worker-b") == []
    assert claim("worker-a") == []
    lease = PartitionLease.objects.get()
    assert (lease.owner, lease.epoch) == ("worker-a", 1)


def test_heads_of_different_partitions_are_claimed_at_once():
    keys = keys_in_distinct_partitions(3)
    firsts = {enqueue(key, 2)[0] for key in keys}
    assert {item.job_id for item in claim("worker-a")} == firsts


def test_success_advances_the_head_and_releases_the_lease_with_the_terminal_state():
    ids = enqueue("a", 2)
    [item] = claim("worker-a")
    [written] = finish("worker-a", item)
    assert written.job_id == ids[0]
    assert stage(ids[0]) == "success"
    head = PartitionHead.objects.get()
    assert (head.sequence, head.job_id) == (2, ids[1])
    assert list(PartitionJob.objects.values_list("sequence", flat=True)) == [2]
    lease = PartitionLease.objects.get()
    assert lease.owner == "worker-a"  # kept as an affinity hint
    assert lease.expires_at <= timezone.now()
    [second] = claim("worker-b")
    assert (second.job_id, second.epoch) == (ids[1], 2)


def test_finishing_the_last_head_ends_the_partition():
    enqueue("a", 1)
    [item] = claim("worker-a")
    finish("worker-a", item)
    assert not PartitionHead.objects.exists()
    assert not PartitionJob.objects.exists()
    lease = PartitionLease.objects.get()
    assert (lease.owner, lease.expires_at, lease.epoch) == (None, None, 1)
    # The epoch survives an empty spell: the next claim still raises it.
    enqueue("a", 1)
    assert claim("worker-b")[0].epoch == 2


def test_a_reclaimed_head_fences_the_stale_owner_out_of_completing_or_retrying_it():
    ids = enqueue("a", 2)
    [stale] = claim("worker-a")
    lapse()
    [fresh] = claim("worker-b")
    assert (fresh.job_id, fresh.epoch) == (ids[0], 2)
    assert finish("worker-a", stale) == []
    assert finish("worker-a", stale, RETRY, retry_in=60) == []
    head = PartitionHead.objects.get()
    assert (head.job_id, head.sequence) == (ids[0], 1)
    assert stage(ids[0]) == "running"
    assert PartitionJob.objects.count() == 2
    assert [o.job_id for o in finish("worker-b", fresh)] == [ids[0]]
    assert PartitionHead.objects.get().job_id == ids[1]


def test_a_retry_keeps_the_head_and_blocks_the_rows_behind_until_it_is_due():
    ids = enqueue("a", 2)
    [item] = claim("worker-a")
    finish("worker-a", item, RETRY, retry_in=60)
    head = PartitionHead.objects.get()
    assert head.job_id == ids[0]
    assert head.available_at > timezone.now() + timedelta(seconds=55)
    assert stage(ids[0]) == "requeued"
    assert claim("worker-b") == []
    PartitionHead.objects.update(available_at=timezone.now())
    [again] = claim("worker-b")
    assert (again.job_id, again.epoch) == (ids[0], 2)


def test_a_head_that_fails_its_last_attempt_ends_failed_and_the_partition_moves_on():
    ids = enqueue("a", 2)
    [item] = claim("worker-a")
    finish("worker-a", item, FAILED)
    assert stage(ids[0]) == "failed"
    assert claim("worker-a")[0].job_id == ids[1]


def test_a_delayed_head_blocks_the_rows_behind_it():
    key = "a"
    delayed = tasks.step.using(partition_key=key, run_after=timedelta(hours=1)).enqueue(key, 0)
    enqueue(key, 1)
    assert claim("worker-a") == []
    PartitionHead.objects.update(available_at=timezone.now())
    assert claim("worker-a")[0].job_id == delayed.id


def test_a_head_waiting_for_its_parent_blocks_the_rows_behind_it_until_released():
    ids = enqueue("a", 2)
    JobIndexRow.objects.filter(job_id=ids[0]).update(stage="waiting")
    assert claim("worker-a") == []
    JobIndexRow.objects.filter(job_id=ids[0]).update(stage="enqueued")
    assert claim("worker-a")[0].job_id == ids[0]


def test_a_head_cancelled_while_queued_is_skipped():
    ids = enqueue("a", 2)
    cancel_job(ids[0], namespace="tests")
    [item] = claim("worker-a")
    assert (item.job_id, item.sequence) == (ids[1], 2)
    assert list(PartitionJob.objects.values_list("sequence", flat=True)) == [2]


def test_claiming_reads_heads_and_never_the_retained_partition_rows():
    for key in keys_in_distinct_partitions(4):
        enqueue(key, 25)
    with CaptureQueriesContext(connection) as queries:
        claimed = claim("worker-a")
    assert len(claimed) == 4
    # Before 6.0, Django logs the SQL of a server-bound (hot) statement as None.
    logged = [q["sql"] for q in queries if q["sql"] is not None]
    assert logged
    assert not [sql for sql in logged if "later_partition_job" in sql]


def test_a_worker_takes_another_workers_preferred_partition_only_after_the_steal_delay():
    keys = keys_in_distinct_partitions(2)
    mine = enqueue(keys[0])[0]
    theirs = enqueue(keys[1])[0]
    preference = Preference(
        tokens=frozenset({partition_token("orders", partition_for_key(keys[0], ORDERS))}),
        everything=False,
        steal_after=30,
    )
    assert [c.job_id for c in claim("worker-a", preference=preference)] == [mine]
    PartitionHead.objects.filter(job_id=theirs).update(
        available_at=timezone.now() - timedelta(seconds=31)
    )
    assert [c.job_id for c in claim("worker-a", preference=preference)] == [theirs]


def test_the_steal_delay_counts_from_when_a_row_becomes_head_not_from_its_enqueue():
    keys = keys_in_distinct_partitions(2)
    enqueue(keys[0])
    theirs = enqueue(keys[1], 2)
    # A backlog enqueued long ago: every row of the other worker's partition is old.
    long_ago = timezone.now() - timedelta(seconds=31)
    PartitionHead.objects.filter(job_id=theirs[0]).update(available_at=long_ago)
    PartitionJob.objects.filter(job_id__in=theirs).update(available_at=long_ago)
    preference = Preference(
        tokens=frozenset({partition_token("orders", partition_for_key(keys[0], ORDERS))}),
        everything=False,
        steal_after=30,
    )
    stolen = [c for c in claim("worker-a", preference=preference) if c.job_id == theirs[0]]
    finish("worker-a", stolen[0])
    # The next row has only just become head: its preferred worker gets the first chance.
    assert [c.job_id for c in claim("worker-a", preference=preference)] == []
    assert PartitionHead.objects.get(job_id=theirs[1]).available_at > long_ago
    PartitionHead.objects.filter(job_id=theirs[1]).update(available_at=long_ago)
    assert [c.job_id for c in claim("worker-a", preference=preference)] == [theirs[1]]


def test_a_silent_workers_partitions_are_claimed_at_once_before_it_counts_as_dead(settings):
    settings.LATER_HEARTBEAT_INTERVAL = 1
    settings.LATER_WORKER_DEAD_AFTER = 60
    now = timezone.now()
    for worker_id in ("worker-a", "worker-b", "worker-c"):
        Worker.objects.create(
            namespace="tests",
            worker_id=worker_id,
            hostname="h",
            pid=1,
            started_at=now,
            heartbeat_at=now,
        )
    shares = spread("orders", ORDERS, ["worker-a", "worker-b", "worker-c"])

    def share(*workers: str) -> frozenset[str]:
        return frozenset(
            partition_token("orders", p) for p, owner in enumerate(shares) if owner in workers
        )

    key_of_c = next(
        f"key-{n}"
        for n in range(1000)
        if shares[partition_for_key(f"key-{n}", ORDERS)] == "worker-c"
    )
    job = enqueue(key_of_c)[0]  # also stores the topic's partition count
    assignment = Assignment("tests", "worker-a", "default")

    def orders(preference: Preference) -> frozenset[str]:
        return frozenset(t for t in preference.tokens if t.startswith("orders:"))

    assert orders(assignment.current()) == share("worker-a")
    assert claim("worker-a", preference=assignment.current()) == []  # c's, not yet stolen
    # worker-c stops heartbeating: three intervals on, it still counts in the spread
    # (LATER_WORKER_DEAD_AFTER is a minute), but its partitions are claimed at once.
    Worker.objects.filter(worker_id="worker-c").update(heartbeat_at=now - timedelta(seconds=3.5))
    assignment.refresh()
    preference = assignment.current()
    assert (orders(preference), preference.everything) == (share("worker-a", "worker-c"), False)
    assert [c.job_id for c in claim("worker-a", preference=preference)] == [job]
    # Heard from again, it has its share back.
    Worker.objects.filter(worker_id="worker-c").update(heartbeat_at=timezone.now())
    assignment.refresh()
    assert orders(assignment.current()) == share("worker-a")


def test_a_continuation_waits_in_its_parents_partition_and_runs_right_after_it():
    from tests import tasks as plain_tasks

    parent = tasks.step.using(partition_key="p").enqueue("p", 0)
    child = plain_tasks.record.using(after=parent).enqueue("child", 1)
    behind = tasks.step.using(partition_key="p").enqueue("p", 2)
    assert stage(child.id) == "waiting"
    [first] = claim("worker-a")
    assert first.job_id == parent.id
    finish("worker-a", first)
    [second] = claim("worker-a")
    assert (second.job_id, second.sequence, second.topic) == (child.id, 2, "orders")
    assert second.record.partition_key == "p"
    finish("worker-a", second)
    assert claim("worker-a")[0].job_id == behind.id


def test_a_delayed_head_cancelled_before_its_time_stops_blocking_at_once():
    delayed = tasks.step.using(partition_key="a", run_after=timedelta(hours=1)).enqueue("a", 0)
    behind = enqueue("a", 1)[0]
    cancel_job(delayed.id, namespace="tests")
    assert claim("worker-a")[0].job_id == behind


def test_retrying_a_failed_ordered_job_puts_it_back_in_its_partition_not_the_shared_queue():
    from later_django.jobs import retry_job
    from later_django.models import DeliveryCommand

    ids = enqueue("a", 2)
    [item] = claim("worker-a")
    finish("worker-a", item, FAILED)
    [second] = claim("worker-a")
    assert second.job_id == ids[1]
    finish("worker-a", second)
    retry_job(ids[0], namespace="tests")
    assert not DeliveryCommand.objects.filter(job_id=ids[0]).exists()
    assert stage(ids[0]) == "enqueued"
    [again] = claim("worker-a")
    assert again.job_id == ids[0]
    assert again.record is not None
    assert again.record.sequence == 3
