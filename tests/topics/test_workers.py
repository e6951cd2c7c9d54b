"""Ordered jobs run by real worker processes: per-key order, parallel partitions, retries."""

from __future__ import annotations

import time

import pytest
from django.conf import settings
from django.utils import timezone

from later_django import partition_for_key
from later_django.models import JobIndexRow, PartitionHead, Topic, Worker
from later_django.topics.assignment import spread
from tests.conftest import wait_for
from tests.models import Execution
from tests.topics import tasks

from .conftest import ORDERS
from .helpers import keys_in_distinct_partitions

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def all_finished(count: int) -> bool:
    return JobIndexRow.objects.filter(stage__in=["success", "failed"]).count() >= count


def runs(kind: str) -> list[Execution]:
    return list(Execution.objects.filter(kind=kind).order_by("id"))


def test_each_key_runs_in_order_one_at_a_time_while_partitions_run_in_parallel(start_worker):
    keys = keys_in_distinct_partitions(4)
    for key in keys:
        tasks.timed_step.using(partition_key=key).enqueue_many(
            [((key, n, 0.2), {}) for n in range(4)]
        )
    start_worker("--concurrency", "4")
    start_worker("--concurrency", "4")
    wait_for(lambda: all_finished(16), timeout=60)
    assert JobIndexRow.objects.filter(stage="success").count() == 16
    spans = {}
    for key in keys:
        starts, ends = runs(f"start:{key}"), runs(f"end:{key}")
        assert [int(e.value) for e in starts] == [0, 1, 2, 3]
        assert [int(e.value) for e in ends] == [0, 1, 2, 3]
        # One at a time: each job starts after the one before it ended.
        for before, after in zip(ends, starts[1:], strict=False):
            assert after.at >= before.at
        spans[key] = [(s.at, e.at) for s, e in zip(starts, ends, strict=True)]
    # Different partitions ran at the same time.
    overlapping = sum(
        1
        for a in keys
        for b in keys
        if a < b
        for sa, ea in spans[a]
        for sb, eb in spans[b]
        if sa < eb and sb < ea
    )
    assert overlapping > 0


def test_a_retrying_head_blocks_its_partition_and_one_out_of_attempts_lets_it_move_on(
    start_worker,
):
    flaky, doomed = keys_in_distinct_partitions(2)
    tasks.flaky_step.using(partition_key=flaky).enqueue(flaky, 0, 2)
    tasks.step.using(partition_key=flaky).enqueue(flaky, 1)
    failed = tasks.doomed_step.using(partition_key=doomed).enqueue(doomed, 0)
    after_failure = tasks.step.using(partition_key=doomed).enqueue(doomed, 1)
    start_worker("--concurrency", "4")
    wait_for(lambda: all_finished(4), timeout=60)
    attempts = runs(f"flaky:{flaky}")
    assert len(attempts) == 3
    [next_step] = runs(f"step:{flaky}")
    assert next_step.id > attempts[-1].id  # nothing behind the head ran while it retried
    assert len(runs(f"doomed:{doomed}")) == 2
    failed.refresh()
    assert failed.status == "FAILED"
    assert "step 0 of" in failed.errors[-1].traceback
    after_failure.refresh()
    assert after_failure.status == "SUCCESSFUL"
    assert not PartitionHead.objects.exists()


def test_task_code_sees_its_partition_sequence_and_fencing_epoch(start_worker):
    tasks.step.using(partition_key="ctx").enqueue("ctx", 0)
    result = tasks.report_context.using(partition_key="ctx").enqueue("ctx")
    start_worker()
    wait_for(lambda: all_finished(2), timeout=60)
    [run] = runs("context:ctx")
    assert run.value == f"orders|{partition_for_key('ctx', ORDERS)}|2|2"
    result.refresh()
    assert result.return_value == 2


def test_a_worker_refuses_to_start_when_a_topic_has_another_partition_count(start_worker):
    Topic.objects.update_or_create(
        namespace="tests",
        name="orders",
        defaults={"partition_count": 3, "created_at": timezone.now()},
    )
    worker = start_worker()
    assert worker.wait(timeout=60) != 0
    assert (
        "Topic 'orders' has 3 partitions in the database but "
        "TASKS['default']['OPTIONS']['topics']['orders'] is 8" in worker.output()
    )


def test_live_workers_split_partitions_by_rendezvous_hashing(start_worker):
    # Enough threads for every preferred partition at once: with fewer, heads wait
    # past the steal delay and the other worker takes them by design.
    workers = [start_worker("--concurrency", "8") for _ in range(2)]
    wait_for(lambda: Worker.objects.filter(namespace="tests").count() == 2, timeout=30)
    # Each worker recomputes its preferred partitions once per heartbeat interval:
    # let both see the other before the work arrives.
    time.sleep(3 * settings.LATER_HEARTBEAT_INTERVAL)
    live = sorted(Worker.objects.values_list("worker_id", flat=True))
    keys = keys_in_distinct_partitions(ORDERS)
    for key in keys:
        tasks.step.using(partition_key=key).enqueue_many([((key, n), {}) for n in range(10)])
    wait_for(lambda: all_finished(10 * ORDERS), timeout=120)
    owners = spread("orders", ORDERS, live)  # four partitions each
    on_owner = 0
    for key in keys:
        owner = owners[partition_for_key(key, ORDERS)]
        ran_on = JobIndexRow.objects.filter(
            topic="orders", partition=partition_for_key(key, ORDERS)
        )
        on_owner += ran_on.filter(worker_id=owner).count()
    by_worker = {w: JobIndexRow.objects.filter(worker_id=w).count() for w in live}
    logs = "\n".join(w.output()[-3000:] for w in workers)
    assert all(by_worker.values()), (by_worker, logs)  # each live worker took its share
    assert on_owner >= 0.6 * 10 * ORDERS, (on_owner, by_worker)


def test_a_worker_that_joins_takes_its_share_of_busy_partitions(start_worker):
    keys = keys_in_distinct_partitions(ORDERS)
    for key in keys:
        tasks.timed_step.using(partition_key=key).enqueue_many(
            [((key, n, 0.05), {}) for n in range(25)]
        )
    first = start_worker("--concurrency", "2")
    wait_for(lambda: all_finished(ORDERS), timeout=60)
    second = start_worker("--concurrency", "2")
    wait_for(lambda: Worker.objects.filter(namespace="tests").count() == 2, timeout=30)
    wait_for(lambda: all_finished(25 * ORDERS), timeout=120)
    ran_by_second = Execution.objects.filter(kind__startswith="start:", pid=second.pid)
    assert ran_by_second.exists()
    assert first.pid != second.pid
