"""Registering topics at migrate and worker start, and changing a drained topic's count."""

import pytest
from django.apps import apps

from later_django.exceptions import InvalidArgument, InvalidTransition, TopicLayoutMismatch
from later_django.models import PartitionHead, PartitionLease, PartitionSequence, Topic
from later_django.topics.receivers import register_after_migrate
from later_django.topics.registry import change_partition_count, register_topics
from tests.topics import tasks

pytestmark = pytest.mark.django_db


def stored() -> dict[str, int]:
    return dict(Topic.objects.filter(namespace="tests").values_list("name", "partition_count"))


def backend():
    from later_django.tasks_api import default_task_backend

    return default_task_backend


def test_migrate_registers_declared_topics_and_the_reserved_schedules_topic():
    Topic.objects.all().delete()
    register_after_migrate(sender=apps.get_app_config("later"), using="default")
    assert stored() == {"orders": 8, "events": 4, "later.schedules": 16}


def test_migrate_of_another_app_registers_nothing():
    Topic.objects.all().delete()
    register_after_migrate(sender=apps.get_app_config("auth"), using="default")
    assert stored() == {}


def test_registration_refuses_a_stored_count_that_differs_from_the_configured_one():
    Topic.objects.filter(name="events").update(partition_count=2)
    with pytest.raises(TopicLayoutMismatch) as caught:
        register_topics(backend().later)
    assert str(caught.value) == (
        "Topic 'events' has 2 partitions in the database but "
        "TASKS['default']['OPTIONS']['topics']['events'] is 4; a live topic's partition count "
        "changes only through later_django.topics.registry.change_partition_count in a "
        "migration (docs/topics.md)."
    )


def test_declaring_the_reserved_topic_is_refused(settings):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {"namespace": "tests", "topics": {"later.schedules": 4}},
        }
    }
    with pytest.raises(InvalidArgument) as caught:
        register_topics(backend().later)
    assert str(caught.value) == (
        "OPTIONS['topics'] declares 'later.schedules'; that name is reserved by later_django "
        "and must not be declared."
    )


def test_a_topic_with_queued_jobs_keeps_its_partition_count():
    tasks.step.using(partition_key="k").enqueue("k", 1)
    with pytest.raises(InvalidTransition) as caught:
        change_partition_count("tests", "orders", 16)
    assert str(caught.value) == (
        "Topic 'orders' still has 1 queued job(s); its partition count can change only once "
        "it is drained (stop producers and let workers finish)."
    )
    assert stored()["orders"] == 8


def test_a_drained_topic_changes_its_count_and_forgets_partitions_beyond_it():
    for partition in (1, 5):
        PartitionSequence.objects.create(
            namespace="tests", topic="orders", partition=partition, next_sequence=9
        )
        PartitionLease.objects.create(
            namespace="tests", topic="orders", partition=partition, epoch=3
        )
    change_partition_count("tests", "orders", 4)
    assert stored()["orders"] == 4
    assert list(PartitionSequence.objects.values_list("partition", flat=True)) == [1]
    assert list(PartitionLease.objects.values_list("partition", "epoch")) == [(1, 3)]
    assert not PartitionHead.objects.exists()


def test_a_partition_count_outside_1_to_4096_cannot_be_set():
    with pytest.raises(InvalidArgument) as caught:
        change_partition_count("tests", "orders", 0)
    assert str(caught.value) == (
        "count is 0; it must be a whole number of partitions from 1 to 4096."
    )
