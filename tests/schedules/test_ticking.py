"""Firing due schedules: one job per occurrence, coalesced after downtime, held when sequential."""

import logging
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

import later_django
from later_django.jobs import cancel_job, get_job
from later_django.models import JobIndexRow, Schedule
from later_django.records import from_micros
from later_django.schedules.ticking import run_due
from later_django.tasks_api import default_task_backend
from tests import tasks
from tests.schedules import tasks as schedule_tasks

pytestmark = pytest.mark.django_db


def make_due(identifier: str, ago: timedelta = timedelta(seconds=1)):
    due = (timezone.now() - ago).replace(microsecond=0)
    Schedule.objects.filter(identifier=identifier).update(next_run_at=due)
    return due


def test_a_due_schedule_enqueues_one_occurrence_and_moves_on():
    later_django.schedule("minutely", "* * * * *", schedule_tasks.tick, "k", label="x")
    due = make_due("minutely")
    [job_id] = run_due(default_task_backend)
    view = get_job(job_id, namespace="tests")
    assert (view.stage, view.record.schedule, view.run_after) == ("enqueued", "minutely", due)
    assert (view.args, view.kwargs, view.queue_name, view.priority) == (
        ["k"],
        {"label": "x"},
        "slow",
        5,
    )
    [info] = later_django.list_schedules()
    assert (info.last_run_at, info.last_job_id) == (due, job_id)
    assert info.next_run_at > timezone.now()
    assert info.next_run_at.second == 0
    assert run_due(default_task_backend) == []


def test_a_schedule_that_is_not_due_enqueues_nothing():
    later_django.schedule("later", "0 3 * * *", tasks.noop)
    assert run_due(default_task_backend) == []
    assert not JobIndexRow.objects.exists()


def test_after_downtime_a_schedule_runs_once_for_the_missed_period():
    later_django.schedule("minutely", "* * * * *", tasks.noop)
    due = make_due("minutely", ago=timedelta(hours=3))
    assert len(run_due(default_task_backend)) == 1
    assert run_due(default_task_backend) == []
    [info] = later_django.list_schedules()
    assert info.last_run_at == due
    assert timezone.now() < info.next_run_at <= timezone.now() + timedelta(minutes=1)


def test_a_schedule_whose_task_is_gone_skips_the_occurrence_and_moves_on(caplog):
    later_django.schedule("orphan", "* * * * *", tasks.noop)
    due = make_due("orphan")
    Schedule.objects.filter(identifier="orphan").update(task_path="tests.tasks.removed")
    with caplog.at_level(logging.ERROR, logger="later_django.schedules.ticking"):
        assert run_due(default_task_backend) == []
    assert f"schedule identifier=orphan could not enqueue its occurrence due={due}" in caplog.text
    assert "Task 'tests.tasks.removed' cannot be imported" in caplog.text
    [info] = later_django.list_schedules()
    assert (info.last_run_at, info.last_job_id) == (due, None)
    assert info.next_run_at > timezone.now()
    assert not JobIndexRow.objects.exists()


def test_a_schedule_whose_stored_call_is_corrupt_is_skipped_and_the_others_fire(caplog):
    later_django.schedule("broken", "* * * * *", tasks.noop)
    later_django.schedule("fine", "* * * * *", tasks.noop)
    due = make_due("broken")
    make_due("fine")
    Schedule.objects.filter(identifier="broken").update(payload=b"\xc1\xff")
    with caplog.at_level(logging.ERROR, logger="later_django.schedules.ticking"):
        [job_id] = run_due(default_task_backend)
    assert get_job(job_id, namespace="tests").record.schedule == "fine"
    assert f"schedule identifier=broken could not enqueue its occurrence due={due}" in caplog.text
    assert "Stored call of schedule 'broken' cannot be decoded (FormatError)" in caplog.text
    broken, fine = later_django.list_schedules()
    assert broken.next_run_at > timezone.now()
    assert broken.error is not None
    assert fine.error is None


def test_a_plain_schedule_fires_even_while_its_previous_occurrence_runs():
    later_django.schedule("overlapping", "* * * * *", tasks.noop)
    make_due("overlapping")
    [first] = run_due(default_task_backend)
    make_due("overlapping")
    [second] = run_due(default_task_backend)
    assert first != second
    assert JobIndexRow.objects.filter(stage="enqueued").count() == 2


def test_a_sequential_schedule_waits_for_its_unfinished_previous_occurrence():
    later_django.schedule("one-at-a-time", "* * * * *", tasks.noop, sequential=True)
    make_due("one-at-a-time")
    [first] = run_due(default_task_backend)
    due = make_due("one-at-a-time", ago=timedelta(minutes=5))
    assert run_due(default_task_backend) == []
    [info] = later_django.list_schedules()
    assert (info.next_run_at, info.last_job_id) == (due, first)
    cancel_job(first, namespace="tests")
    [second] = run_due(default_task_backend)
    record = get_job(second, namespace="tests").record
    assert from_micros(record.run_after) == due
    assert record.schedule == "one-at-a-time"


@pytest.mark.django_db(transaction=True)
def test_workers_ticking_at_once_enqueue_each_occurrence_once():
    later_django.schedule("contended", "* * * * *", tasks.noop)
    make_due("contended")
    start = threading.Barrier(4)
    fired: list[str] = []

    def tick():
        try:
            start.wait(5)
            fired.extend(run_due(default_task_backend))
        finally:
            connection.close()

    threads = [threading.Thread(target=tick) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(fired) == 1
    assert JobIndexRow.objects.count() == 1


def test_a_sequential_occurrence_and_its_continuations_share_one_partition():
    later_django.schedule("ordered", "* * * * *", tasks.noop, sequential=True)
    make_due("ordered")
    [occurrence] = run_due(default_task_backend)
    child = tasks.record.using(after=occurrence).enqueue("k", "v")
    parent_row = JobIndexRow.objects.get(job_id=occurrence)
    child_row = JobIndexRow.objects.get(job_id=child.id)
    assert parent_row.topic == "later.schedules"
    assert (child_row.topic, child_row.partition, child_row.stage) == (
        "later.schedules",
        parent_row.partition,
        "waiting",
    )
    assert child_row.sequence == parent_row.sequence + 1


def test_continuations_of_plain_occurrences_stay_out_of_partitions():
    later_django.schedule("plain", "* * * * *", tasks.noop)
    make_due("plain")
    [occurrence] = run_due(default_task_backend)
    child = tasks.record.using(after=occurrence).enqueue("k", "v")
    assert JobIndexRow.objects.get(job_id=child.id).topic is None


def test_next_due_is_the_earliest_run_still_ahead():
    from later_django.schedules.ticking import next_due

    assert next_due(default_task_backend) is None
    later_django.schedule("soon", "* * * * *", tasks.noop)
    later_django.schedule("later", "0 3 * * *", tasks.noop)
    later_django.schedule("stuck", "* * * * *", tasks.noop)
    soon = Schedule.objects.get(identifier="soon").next_run_at
    make_due("stuck")  # due, but not fired yet (sequential, or another worker's): not ahead

    assert next_due(default_task_backend) == soon
    make_due("soon")
    assert next_due(default_task_backend) == Schedule.objects.get(identifier="later").next_run_at
