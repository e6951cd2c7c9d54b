from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from later_django.counts import fold, oldest_in_stage, stage_counts
from later_django.engine.enqueue import STREAMED_BATCH
from later_django.models import DeliveryCommand, JobIndexRow, StageCount, StageCountDelta
from later_django.states import Stage
from tests import tasks
from tests.db_state import index_stage_counts
from tests.topics import tasks as topic_tasks

pytestmark = pytest.mark.django_db(transaction=True)


def test_stage_counts_equal_the_index_before_and_after_folding():
    for i in range(5):
        tasks.add.enqueue(i, i)
    tasks.add.enqueue_many([((1, 2), {})] * 3)
    expected = {"enqueued": 8}
    assert {k: v for k, v in stage_counts("tests").items() if v} == expected
    fold()
    assert not StageCountDelta.objects.exists()
    assert {k: v for k, v in stage_counts("tests").items() if v} == expected
    assert index_stage_counts("tests") == expected


def test_postgresql_appends_deltas_instead_of_locking_the_totals(vendor):
    tasks.add.enqueue(1, 1)
    if vendor == "postgresql":
        assert list(StageCountDelta.objects.values_list("stage", "delta")) == [("enqueued", 1)]
        assert not StageCount.objects.filter(count__gt=0).exists()
        fold()
        assert StageCount.objects.get(namespace="tests", stage="enqueued").count == 1
    else:
        assert not StageCountDelta.objects.exists()
        assert StageCount.objects.get(namespace="tests", stage="enqueued").count == 1


def test_every_kind_of_enqueue_is_counted_in_its_stage():
    # PostgreSQL counts new jobs in the enqueue statements themselves (migration 0015),
    # SQLite by row triggers: each of the statements' shapes must be counted.
    parent = tasks.add.enqueue(1, 1)  # one job
    tasks.add.using(run_after=timedelta(hours=1)).enqueue(1, 1)  # delayed
    tasks.add.enqueue_many([((i, i), {}) for i in range(3)])  # alike jobs, one statement
    tasks.add.enqueue_many([((i, i), {}) for i in range(STREAMED_BATCH + 2)])  # batches
    tasks.add.using(after=parent).enqueue(2, 2)  # a continuation: waiting, mixed shape
    tasks.add.using(after=parent).enqueue_many([((3, 3), {}), ((4, 4), {})])
    topic_tasks.step.using(partition_key="k").enqueue("k", 1)  # ordered: mixed shape
    topic_tasks.step.using(partition_key="k").enqueue_many([(("k", 2), {}), (("k", 3), {})])

    expected = index_stage_counts("tests")
    assert expected == {"enqueued": 1 + 3 + STREAMED_BATCH + 2 + 3, "delayed": 1, "waiting": 3}
    assert {k: v for k, v in stage_counts("tests").items() if v} == expected
    fold()
    assert {k: v for k, v in stage_counts("tests").items() if v} == expected


def test_the_oldest_queued_job_is_found_across_priorities_commands_and_topics():
    now = timezone.now()
    assert oldest_in_stage("tests", Stage.ENQUEUED) is None
    tasks.add.using(run_after=timedelta(hours=1)).enqueue(1, 1)  # delayed: not queued
    assert oldest_in_stage("tests", Stage.ENQUEUED) is None

    def ready(job_id: str, minutes: int) -> datetime:
        moment = now - timedelta(minutes=minutes)
        JobIndexRow.objects.filter(job_id=job_id).update(transitioned_at=moment)
        DeliveryCommand.objects.filter(job_id=job_id).update(available_at=moment)
        return JobIndexRow.objects.get(job_id=job_id).transitioned_at

    urgent = tasks.add.using(priority=10).enqueue(1, 1)
    ready(urgent.id, 2)
    assert oldest_in_stage("tests", Stage.ENQUEUED) == ready(urgent.id, 2)
    # A lower priority's older command, and one of a priority below that: the walk
    # visits every priority in use.
    ready(tasks.add.using(priority=-5).enqueue(1, 1).id, 3)
    lowest = ready(tasks.add.using(priority=-20).enqueue(1, 1).id, 4)
    assert oldest_in_stage("tests", Stage.ENQUEUED) == lowest
    # A command a worker holds belongs to a running job, however old.
    held = tasks.add.using(priority=-20).enqueue(1, 1)
    ready(held.id, 9)
    DeliveryCommand.objects.filter(job_id=held.id).update(lease_owner="w:1:abc")
    assert oldest_in_stage("tests", Stage.ENQUEUED) == lowest
    # A topic's queued job has no command: the index row tells.
    ordered = topic_tasks.step.using(partition_key="k").enqueue("k", 1)
    assert not DeliveryCommand.objects.filter(job_id=ordered.id).exists()
    assert oldest_in_stage("tests", Stage.ENQUEUED) == lowest
    JobIndexRow.objects.filter(job_id=ordered.id).update(transitioned_at=now - timedelta(minutes=6))
    assert oldest_in_stage("tests", Stage.ENQUEUED) == now - timedelta(minutes=6)
    # Other stages are read from the index, as before.
    assert oldest_in_stage("tests", Stage.DELAYED) is not None
