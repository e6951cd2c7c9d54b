"""Schedules fired by real worker processes: once per tick, replaceable, sequential, durable."""

import itertools
import signal
import time

import pytest
from django.utils import timezone

import later_django
from later_django.models import JobIndexRow, Worker
from later_django.records import from_micros
from later_django.tasks_api import TaskResultStatus, default_task_backend
from tests.conftest import wait_for
from tests.models import Execution
from tests.schedules import tasks

from .occurrences import due_times, occurrences, spans, stage

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def test_three_workers_enqueue_exactly_one_job_per_tick(start_worker):
    for _ in range(3):
        start_worker("--concurrency", "2")
    wait_for(lambda: Worker.objects.filter(namespace="tests").count() == 3, timeout=30)
    later_django.schedule("every-second", "* * * * * *", tasks.tick, "fleet")
    wait_for(lambda: len(due_times("every-second")) >= 6, timeout=30)
    later_django.unschedule("every-second")
    dues = due_times("every-second")
    assert all(due.microsecond == 0 for due in dues)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(dues)]
    # Never two jobs for one tick; a second is skipped only if every worker was stalled
    # for over a second (the tick is checked every 0.05 s), so nearly all gaps are 1 s.
    assert all(gap >= 1.0 and gap.is_integer() for gap in gaps), gaps
    assert gaps.count(1.0) >= len(gaps) - 1, gaps
    wait_for(lambda: all(stage(r.id) == "success" for r in occurrences("every-second")))
    assert Execution.objects.filter(kind="fleet").count() == len(dues)


def test_a_worker_fires_each_occurrence_at_its_time_not_at_its_next_poll(start_worker):
    # A poll interval as long as the period: waiting a whole interval between looks
    # would enqueue each occurrence up to a second late, and skip one now and then.
    start_worker("--concurrency", "2", LATER_TEST_POLL_INTERVAL="1.0")
    wait_for(lambda: Worker.objects.filter(namespace="tests").exists(), timeout=30)
    later_django.schedule("on-time", "* * * * * *", tasks.tick, "on-time")
    wait_for(lambda: len(due_times("on-time")) >= 7, timeout=30)
    later_django.unschedule("on-time")

    # Occurrences due before the worker read the new schedule (at its next poll, a second
    # or so later) are enqueued when it does; every one due after that, on time.
    fired = occurrences("on-time")
    read_at = fired[0].enqueued_at
    on_time = [r for r in fired if r.run_after > read_at]  # type: ignore[operator]
    assert len(on_time) >= 4, fired
    late = [(r.enqueued_at - r.run_after) / 1e6 for r in on_time]  # type: ignore[operator]
    assert max(late) < 0.4, late
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(due_times("on-time"))]
    assert gaps == [1.0] * len(gaps), gaps


def test_scheduling_again_replaces_the_definition_workers_use(start_worker):
    later_django.schedule("replaced", "* * * * * *", tasks.tick, "swap", label="old")
    start_worker()
    wait_for(lambda: Execution.objects.filter(kind="swap", value="old").exists(), timeout=20)
    replaced_at = timezone.now()
    later_django.schedule("replaced", "* * * * * *", tasks.tick, "swap", label="new")
    wait_for(lambda: Execution.objects.filter(kind="swap", value="new").count() >= 2, timeout=20)
    later_django.unschedule("replaced")
    after = [r for r in occurrences("replaced") if from_micros(r.run_after) > replaced_at]
    assert after
    assert {r.kwargs["label"] for r in after} == {"new"}
    assert [s.identifier for s in later_django.list_schedules()] == []


def overlapping(runs: list[tuple[float, float]]) -> int:
    return sum(1 for (_, end), (start, _) in itertools.pairwise(runs) if start < end)


def test_sequential_occurrences_of_a_slow_job_never_overlap(start_worker):
    later_django.schedule("slow", "* * * * * *", tasks.spans, "sequential", 1.5, sequential=True)
    start_worker("--concurrency", "4")
    start_worker("--concurrency", "4")
    wait_for(lambda: len(spans("sequential")) >= 3, timeout=30)
    later_django.unschedule("slow")
    runs = spans("sequential")
    assert overlapping(runs) == 0
    assert {r.topic for r in occurrences("slow")} == {"later.schedules"}
    # Each occurrence covered the ticks it waited through: fewer jobs than seconds.
    assert len(occurrences("slow")) < runs[-1][1] - runs[0][0]


def test_continuations_of_sequential_occurrences_run_before_the_next_occurrence(start_worker):
    later_django.schedule(
        "chained", "* * * * * *", tasks.spans_then_continue, "chained", 0.6, sequential=True
    )
    start_worker("--concurrency", "4")
    start_worker("--concurrency", "4")
    wait_for(lambda: len(spans("chained")) >= 6, timeout=40)
    later_django.unschedule("chained")
    # Occurrences and their continuations alternate and never overlap.
    assert overlapping(spans("chained")) == 0


def test_plain_occurrences_of_a_slow_job_do_overlap(start_worker):
    later_django.schedule("slow-plain", "* * * * * *", tasks.spans, "plain", 1.5)
    start_worker("--concurrency", "4")
    wait_for(lambda: len(spans("plain")) >= 3, timeout=30)
    later_django.unschedule("slow-plain")
    assert overlapping(spans("plain")) > 0


def test_a_worker_killed_during_an_occurrence_does_not_lose_the_schedule(start_worker):
    later_django.schedule("durable", "* * * * * *", tasks.spans, "durable", 1.0, sequential=True)
    doomed = start_worker()

    def occurrence_running():
        return JobIndexRow.objects.filter(stage="running", worker_id__contains=f":{doomed.pid}:")

    wait_for(lambda: occurrence_running().exists(), timeout=20)
    killed_job = occurrence_running().get().job_id
    doomed.signal(signal.SIGKILL)
    doomed.wait(10)
    killed_at = time.time()
    survivor = start_worker()
    wait_for(lambda: sum(1 for s, _ in spans("durable") if s > killed_at) >= 3, timeout=40)
    later_django.unschedule("durable")
    result = default_task_backend.get_result(killed_job)
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert len(result.worker_ids) == 2
    assert str(survivor.pid) in result.worker_ids[-1]
    assert overlapping(spans("durable")) == 0


def test_a_schedule_declared_in_settings_is_synced_at_worker_start(start_worker):
    start_worker(DJANGO_SETTINGS_MODULE="tests.schedules.declared_settings")
    wait_for(lambda: Execution.objects.filter(kind="declared").count() >= 2, timeout=30)
    [info] = later_django.list_schedules()
    assert (info.identifier, info.origin, info.kwargs) == (
        "declared-tick",
        "settings",
        {"label": "from settings"},
    )


def test_a_worker_refuses_to_start_with_an_invalid_declared_schedule(start_worker):
    worker = start_worker(
        DJANGO_SETTINGS_MODULE="tests.schedules.declared_settings",
        LATER_TEST_SCHEDULE_CRON="0 0 30 2 *",
    )
    assert worker.wait(timeout=60) != 0
    output = worker.output()
    assert (
        "later.E010) TASKS['default']['OPTIONS']['schedules']['declared-tick']['cron'] is "
        "'0 0 30 2 *', which never matches a real date" in output
    )
    assert later_django.list_schedules() == []


def test_a_paused_schedule_does_not_fire_and_fires_again_once_resumed(start_worker):
    later_django.schedule("paused", "* * * * * *", tasks.tick, "paused")
    later_django.pause_schedule("paused")
    # A running schedule beside it shows the worker ticking all along.
    later_django.schedule("witness", "* * * * * *", tasks.tick, "witness")
    start_worker()
    wait_for(lambda: len(due_times("witness")) >= 3, timeout=30)
    assert occurrences("paused") == []

    resumed_at = timezone.now()
    later_django.resume_schedule("paused")
    wait_for(lambda: len(due_times("paused")) >= 2, timeout=30)
    later_django.unschedule("paused")
    later_django.unschedule("witness")
    # Every run is due after the resume: none was made up for the paused seconds.
    assert all(due > resumed_at for due in due_times("paused"))
