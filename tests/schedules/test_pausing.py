"""pause_schedule(), resume_schedule() and running a schedule now, without a worker."""

from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

import later_django
from later_django.exceptions import ScheduleBusy, ScheduleNotFound
from later_django.models import JobIndexRow, Schedule
from later_django.schedules import control
from later_django.schedules.ticking import UNPAUSED, next_due, run_due
from later_django.tasks_api import default_task_backend
from tests import tasks
from tests.schedules import tasks as schedule_tasks

from .occurrences import occurrences

pytestmark = pytest.mark.django_db


def make_due(identifier: str, ago: timedelta = timedelta(seconds=1)) -> None:
    Schedule.objects.filter(identifier=identifier).update(next_run_at=timezone.now() - ago)


def test_a_paused_schedule_does_not_fire_when_due():
    later_django.schedule("minutely", "* * * * *", schedule_tasks.tick, "k")
    info = later_django.pause_schedule("minutely")
    assert info.paused is True
    make_due("minutely", timedelta(hours=1))
    assert run_due(default_task_backend) == []
    assert occurrences("minutely") == []


def test_a_paused_schedule_is_not_what_workers_wake_for():
    later_django.schedule("soon", "* * * * * *", schedule_tasks.tick, "k")
    later_django.schedule("later", "0 3 * * *", schedule_tasks.tick, "k")
    later_django.pause_schedule("soon")
    assert next_due(default_task_backend) == Schedule.objects.get(identifier="later").next_run_at


def test_resuming_runs_from_now_without_making_up_missed_runs():
    later_django.schedule("minutely", "* * * * *", schedule_tasks.tick, "k")
    later_django.pause_schedule("minutely")
    make_due("minutely", timedelta(hours=3))  # three hours of minutes missed while paused
    before = timezone.now()
    info = later_django.resume_schedule("minutely")
    assert info.paused is False
    assert before < info.next_run_at <= before + timedelta(minutes=1)
    assert info.next_run_at.second == 0
    assert run_due(default_task_backend) == []  # no burst
    make_due("minutely")
    assert len(run_due(default_task_backend)) == 1


def test_resuming_a_schedule_that_is_not_paused_changes_nothing():
    later_django.schedule("minutely", "* * * * *", schedule_tasks.tick, "k")
    make_due("minutely")
    due = Schedule.objects.get().next_run_at
    assert later_django.resume_schedule("minutely").next_run_at == due
    assert len(run_due(default_task_backend)) == 1  # the due run is not skipped


def test_scheduling_a_paused_schedule_again_keeps_it_paused():
    later_django.schedule("nightly", "0 3 * * *", tasks.noop)
    later_django.pause_schedule("nightly")
    later_django.schedule("nightly", "0 4 * * *", tasks.noop)
    [info] = later_django.list_schedules()
    assert (info.cron, info.paused) == ("0 4 * * *", True)


def test_pausing_or_resuming_an_unknown_schedule_names_it():
    for call in (later_django.pause_schedule, later_django.resume_schedule):
        with pytest.raises(ScheduleNotFound) as raised:
            call("nope")
        assert str(raised.value) == "No schedule 'nope' in namespace 'tests'."
        assert isinstance(raised.value, LookupError)


def test_run_now_enqueues_one_occurrence_and_keeps_the_next_run():
    later_django.schedule("nightly", "0 3 * * *", schedule_tasks.tick, "k")
    later_django.pause_schedule("nightly")
    planned = Schedule.objects.get().next_run_at
    job_id = control.run_now(default_task_backend, "nightly")
    row = Schedule.objects.get()
    assert (row.last_job_id, row.next_run_at, row.paused) == (job_id, planned, True)
    assert row.last_run_at <= timezone.now()
    [record] = occurrences("nightly")
    assert (record.id, record.args) == (job_id, ["k"])
    assert JobIndexRow.objects.get(job_id=job_id).stage == "enqueued"


def test_run_now_refuses_a_sequential_schedule_whose_last_occurrence_is_unfinished():
    later_django.schedule("report", "0 3 * * *", tasks.noop, sequential=True)
    first = control.run_now(default_task_backend, "report")
    with pytest.raises(ScheduleBusy) as raised:
        control.run_now(default_task_backend, "report")
    assert str(raised.value) == (
        f"Schedule 'report' is sequential and its last occurrence, job {first!r}, has not "
        "finished; run it again once that job has ended."
    )
    assert Schedule.objects.get().last_job_id == first


# On SQLite, Django writes the index's Q(paused=False) as "paused" = 0 from 6.0 and as
# NOT "paused" before (on PostgreSQL as NOT "paused"); a site keeps what its migrate wrote.
INDEX_CONDITIONS = {
    "equals-false": {"sqlite": '"paused" = 0', "postgresql": '"paused" = false'},
    "not-paused": {"sqlite": 'NOT "paused"', "postgresql": 'NOT "paused"'},
}


@pytest.mark.parametrize("condition", INDEX_CONDITIONS.values(), ids=INDEX_CONDITIONS.keys())
def test_a_tick_uses_the_due_index_and_never_reads_paused_schedules(condition):
    later_django.schedule("minutely", "* * * * *", schedule_tasks.tick, "k")
    sql = (
        f"SELECT 1 FROM later_schedule WHERE {UNPAUSED} AND next_run_at <= %s "
        "ORDER BY next_run_at LIMIT 1"
    )
    with connection.cursor() as cursor:
        cursor.execute('DROP INDEX "later_schedule_due_idx"')
        cursor.execute(
            'CREATE INDEX "later_schedule_due_idx" ON "later_schedule" '
            f'("namespace", "next_run_at") WHERE {condition[connection.vendor]}'
        )
        prefix = "EXPLAIN QUERY PLAN " if connection.vendor == "sqlite" else "EXPLAIN "
        if connection.vendor == "postgresql":
            cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute(prefix + sql, ["tests", False, timezone.now()])
        plan = " ".join(str(part) for row in cursor.fetchall() for part in row)
    assert "later_schedule_due_idx" in plan
