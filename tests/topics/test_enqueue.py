"""Enqueueing ordered jobs: routing, sequence allocation in the caller's transaction, errors."""

import pytest
from django.db import transaction

from later_django import partition_for_key
from later_django.exceptions import InvalidArgument, TopicLayoutMismatch, UnknownTopic
from later_django.models import (
    DeliveryCommand,
    JobIndexRow,
    PartitionHead,
    PartitionJob,
    PartitionSequence,
    Topic,
)
from later_django.records import JobRecord
from later_django.results import load_record
from later_django.tasks_api import InvalidTask, default_task_backend
from tests import tasks as plain_tasks
from tests.topics import tasks
from tests.topics.conftest import ORDERS

pytestmark = pytest.mark.django_db


def _record(job_id: str) -> JobRecord:
    found = load_record("tests", job_id, using="default")
    assert found is not None
    return found[1]


def test_jobs_of_one_key_get_consecutive_sequences_in_their_partition():
    results = [tasks.step.using(partition_key="order-1").enqueue("order-1", n) for n in range(3)]
    partition = partition_for_key("order-1", ORDERS)
    rows = list(
        PartitionJob.objects.filter(topic="orders", partition=partition).order_by("sequence")
    )
    assert [(r.sequence, r.job_id) for r in rows] == [(1, r.id) for r in results[:1]] + [
        (2, results[1].id),
        (3, results[2].id),
    ]
    head = PartitionHead.objects.get(topic="orders", partition=partition)
    assert (head.sequence, head.job_id) == (1, results[0].id)
    assert PartitionSequence.objects.get(topic="orders", partition=partition).next_sequence == 4
    record = _record(results[2].id)
    assert (record.topic, record.partition_key, record.partition, record.sequence) == (
        "orders",
        "order-1",
        partition,
        3,
    )
    index = JobIndexRow.objects.get(job_id=results[2].id)
    assert (index.topic, index.partition, index.sequence, index.stage) == (
        "orders",
        partition,
        3,
        "enqueued",
    )
    # Ordered jobs never enter the shared delivery queue: their head is claimed instead.
    assert not DeliveryCommand.objects.exists()


def test_a_rolled_back_enqueue_leaves_no_partition_rows_and_no_sequence_gap():
    key = "order-rollback"
    with transaction.atomic():
        tasks.step.using(partition_key=key).enqueue(key, 1)
        transaction.set_rollback(True)
    assert not PartitionJob.objects.exists()
    assert not PartitionHead.objects.exists()
    assert not PartitionSequence.objects.exists()
    result = tasks.step.using(partition_key=key).enqueue(key, 2)
    assert _record(result.id).sequence == 1


def test_enqueue_many_routes_each_call_by_its_own_key_and_keeps_call_order():
    results = tasks.step.using(partition_key="a").enqueue_many([(("a", n), {}) for n in range(4)])
    sequences = [_record(r.id).sequence for r in results]
    assert sequences == [1, 2, 3, 4]
    assert PartitionHead.objects.get().job_id == results[0].id


def test_keys_of_different_partitions_get_heads_of_their_own():
    keys = [f"customer-{i}" for i in range(40)]
    for key in keys:
        tasks.step.using(partition_key=key).enqueue(key, 0)
    partitions = {partition_for_key(key, ORDERS) for key in keys}
    assert set(PartitionHead.objects.values_list("partition", flat=True)) == partitions
    assert PartitionJob.objects.count() == 40


def test_delayed_job_makes_a_head_that_is_not_available_until_its_time():
    from datetime import timedelta

    from django.utils import timezone

    result = tasks.step.using(partition_key="k", run_after=timedelta(hours=1)).enqueue("k", 1)
    head = PartitionHead.objects.get()
    assert head.job_id == result.id
    assert head.available_at > timezone.now() + timedelta(minutes=59)
    assert JobIndexRow.objects.get(job_id=result.id).stage == "delayed"


def test_the_first_enqueue_registers_the_topic_with_its_partition_count():
    Topic.objects.all().delete()  # as in a database migrated before the topic was declared
    tasks.step.using(partition_key="k").enqueue("k", 1)
    assert Topic.objects.get(namespace="tests", name="orders").partition_count == ORDERS


def test_enqueue_without_a_key_is_refused_naming_the_task_and_topic():
    with pytest.raises(InvalidArgument) as caught:
        tasks.step.enqueue("k", 1)
    assert str(caught.value) == (
        "partition_key is None for task 'tests.topics.tasks.step', which is ordered by topic "
        "'orders'; name the key of every enqueue: task.using(partition_key=...).enqueue()."
    )
    assert not JobIndexRow.objects.exists()


def test_enqueue_to_an_undeclared_topic_is_refused(settings):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {"namespace": "tests", "topics": {"payments": 4}},
        }
    }
    with pytest.raises(UnknownTopic) as caught:
        tasks.step.using(partition_key="k").enqueue("k", 1)
    assert str(caught.value) == (
        "Topic 'orders' is not declared in TASKS['default']['OPTIONS']['topics'] "
        "(declared topics: 'payments'); declare it with its partition count."
    )


def test_a_producer_whose_partition_count_disagrees_with_the_stored_one_is_refused():
    Topic.objects.filter(namespace="tests", name="orders").update(partition_count=3)
    with pytest.raises(TopicLayoutMismatch) as caught:
        tasks.step.using(partition_key="k").enqueue("k", 1)
    assert str(caught.value) == (
        "Topic 'orders' has 3 partitions in the database but "
        "TASKS['default']['OPTIONS']['topics']['orders'] is 8; a live topic's partition count "
        "changes only through later_django.topics.registry.change_partition_count in a "
        "migration (docs/topics.md)."
    )
    # The caller's transaction stays usable, and nothing was written.
    assert not PartitionJob.objects.exists()
    assert not JobIndexRow.objects.exists()


def test_a_partition_key_on_a_task_without_a_topic_is_refused():
    with pytest.raises(InvalidTask) as caught:
        plain_tasks.add.using(partition_key="k")
    assert str(caught.value) == (
        "partition_key is 'k' but task 'tests.tasks.add' has no topic; only tasks declared "
        "with @task(topic=...) take a partition key."
    )


@pytest.mark.parametrize(
    ("key", "shown"),
    [("", "''"), (42, "42"), ("x" * 256, repr("x" * 256))],
)
def test_a_partition_key_that_is_not_a_short_string_is_refused(key, shown):
    with pytest.raises(InvalidTask) as caught:
        tasks.step.using(partition_key=key)
    assert str(caught.value) == (
        f"partition_key is {shown}; it must be a non-empty string of at most 255 characters "
        "(use str(order.pk) for a number)."
    )


def test_a_malformed_topic_name_is_refused_when_the_task_is_declared():
    from dataclasses import replace

    with pytest.raises(InvalidTask) as caught:
        replace(tasks.step, topic="bad topic!")
    assert str(caught.value) == (
        "topic is 'bad topic!'; it must be 1-100 characters of letters, digits, '_', '.', ':' "
        "or '-'."
    )


def test_the_backend_can_partition_any_task_into_the_reserved_schedules_topic():
    result = default_task_backend.enqueue_partitioned(
        plain_tasks.record,
        ["schedule", "tick"],
        {},
        topic="later.schedules",
        key="nightly-report",
        priority=5,
    )
    record = _record(result.id)
    assert (record.topic, record.partition_key, record.sequence, record.priority) == (
        "later.schedules",
        "nightly-report",
        1,
        5,
    )
    assert record.partition == partition_for_key("nightly-report", 16)
    assert Topic.objects.get(name="later.schedules").partition_count == 16


def test_an_ordered_enqueue_costs_a_fixed_number_of_queries(django_assert_max_num_queries):
    tasks.step.using(partition_key="warm").enqueue("warm", 0)  # topic layout checked once
    with django_assert_max_num_queries(9):
        tasks.step.using(partition_key="k").enqueue("k", 1)


def test_a_manually_retried_ordered_job_goes_back_to_the_tail_of_its_partition():
    from django.utils import timezone

    from later_django.engine.enqueue import NewJob
    from later_django.topics.enqueueing import requeue_in_partition

    first = tasks.step.using(partition_key="k").enqueue("k", 1)
    tasks.step.using(partition_key="k").enqueue("k", 2)
    record = _record(first.id)
    now = timezone.now()
    requeue_in_partition(
        default_task_backend.later,
        NewJob(record=record, stage="enqueued", run_at=now, enqueued_at=now),
    )
    assert record.sequence == 3
    assert JobIndexRow.objects.get(job_id=first.id).sequence == 3
    rows = PartitionJob.objects.filter(job_id=first.id).order_by("sequence")
    assert list(rows.values_list("sequence", flat=True)) == [1, 3]
