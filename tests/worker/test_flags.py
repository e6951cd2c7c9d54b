"""later_worker's flags: --concurrency, --queue, --max-jobs, --burst, and their errors."""

import subprocess

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings

from later_django.models import JobIndexRow
from tests import tasks
from tests.conftest import DUMMY_BACKEND, manage, wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def values(kind: str) -> list[str]:
    return list(Execution.objects.filter(kind=kind).order_by("id").values_list("value", flat=True))


def test_one_slot_runs_jobs_by_priority_then_in_enqueue_order(run_burst):
    for name, priority in [("a", 0), ("b", 5), ("c", -3), ("d", 100), ("e", -100), ("f", 5)]:
        tasks.record.using(priority=priority).enqueue("order", name)
    run_burst("--concurrency", "1")
    assert values("order") == ["d", "b", "f", "a", "c", "e"]


def test_concurrency_runs_that_many_jobs_at_the_same_time(run_burst):
    tasks.sleep_then_record.enqueue_many([(("parallel", str(i), 1.0), {}) for i in range(4)])
    run_burst("--concurrency", "4")
    ends = sorted(Execution.objects.filter(kind="parallel").values_list("at", flat=True))
    assert len(ends) == 4
    # Run one after another they would end a second apart.
    assert ends[-1] - ends[0] < 0.6


def test_queue_flag_runs_only_the_named_queues(run_burst):
    tasks.record.enqueue("queues", "default")
    tasks.record.using(queue_name="emails").enqueue("queues", "emails")
    tasks.record.using(queue_name="slow").enqueue("queues", "slow")

    run_burst("--queue", "emails", "--queue", "slow")
    assert sorted(values("queues")) == ["emails", "slow"]
    run_burst()
    assert sorted(values("queues")) == ["default", "emails", "slow"]


def test_max_jobs_exits_after_that_many_jobs(start_worker):
    results = tasks.record.enqueue_many([(("limit", str(i)), {}) for i in range(5)])
    worker = start_worker("--max-jobs", "3", "--concurrency", "1")
    assert worker.wait(timeout=30) == 0

    assert values("limit") == ["0", "1", "2"]
    stages = [JobIndexRow.objects.get(job_id=r.id).stage for r in results]
    assert stages == ["success"] * 3 + ["enqueued"] * 2
    assert " claimed=3 succeeded=3 " in worker.output()


def test_a_worker_without_burst_keeps_waiting_for_work(start_worker):
    worker = start_worker()
    wait_for(lambda: "worker starting" in worker.output(), timeout=20)
    tasks.record.enqueue("waiting", "late")
    wait_for(lambda: values("waiting") == ["late"], timeout=20)
    assert worker.proc.poll() is None


def run_command(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return manage("later_worker", *args, timeout=30, **env)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--queue", "reports"],
            "CommandError: Queue 'reports' is not configured for backend 'default'; its QUEUES "
            "are default, emails, slow.",
        ),
        (
            ["--backend", "other"],
            "CommandError: Task backend 'other' is not in settings.TASKS; its aliases are default.",
        ),
        (
            ["--concurrency", "0"],
            "later_worker: error: argument --concurrency: '0' is not a whole number >= 1",
        ),
        (
            ["--max-jobs", "many"],
            "later_worker: error: argument --max-jobs: 'many' is not a whole number >= 1",
        ),
        (
            ["--shutdown-timeout", "-1"],
            "later_worker: error: argument --shutdown-timeout: '-1' is not a finite number of "
            "seconds >= 0",
        ),
        (
            ["--shutdown-timeout", "nan"],
            "later_worker: error: argument --shutdown-timeout: 'nan' is not a finite number of "
            "seconds >= 0",
        ),
        (
            ["--shutdown-timeout", "inf"],
            "later_worker: error: argument --shutdown-timeout: 'inf' is not a finite number of "
            "seconds >= 0",
        ),
    ],
)
def test_bad_flags_are_refused_with_a_message(args, message):
    completed = run_command(*args)
    assert completed.returncode != 0
    assert message in completed.stderr


def test_a_worker_refuses_to_start_with_an_infinite_heartbeat_interval():
    completed = run_command("--burst", LATER_TEST_HEARTBEAT_INTERVAL="inf")
    assert completed.returncode == 1, completed.stderr
    assert "SystemCheckError" in completed.stderr
    assert (
        "(later.E001) LATER_HEARTBEAT_INTERVAL is inf; it must be a finite number of at least 0.1."
        in completed.stderr
    )


BAD_OPTIONS = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "OPTIONS": {"namespace": "tests", "lease_seconds": 0.5},
    },
    "dummy": {"BACKEND": DUMMY_BACKEND},
    "broken": {"BACKEND": "nowhere.Backend"},
}


@override_settings(TASKS=BAD_OPTIONS)
def test_a_worker_refuses_to_start_with_bad_backend_options():
    with pytest.raises(CommandError) as raised:
        call_command("later_worker", "--burst")
    assert str(raised.value) == (
        "OPTIONS['lease_seconds'] is 0.5; it must be a number of seconds from 1 to 3155760000 "
        "(100 years)."
    )


@override_settings(TASKS=BAD_OPTIONS)
def test_a_worker_refuses_a_backend_that_is_not_later():
    with pytest.raises(CommandError) as raised:
        call_command("later_worker", "--backend", "dummy")
    assert str(raised.value) == (
        "Task backend 'dummy' is DummyBackend; later_worker needs one whose BACKEND is "
        "'later_django.backend.LaterBackend'."
    )


@override_settings(TASKS=BAD_OPTIONS)
def test_a_worker_names_the_import_error_of_a_backend_that_does_not_load():
    with pytest.raises(CommandError) as raised:
        call_command("later_worker", "--backend", "broken")
    assert str(raised.value) == (
        "Task backend 'broken' cannot be loaded: Could not find backend 'nowhere.Backend': "
        "No module named 'nowhere'"
    )


def test_a_worker_refuses_to_start_on_a_database_without_the_later_tables(tmp_path):
    # A fresh SQLite file stands for any database `migrate` has not been run on.
    completed = manage(
        "later_worker", "--burst", database_url=f"sqlite:///{tmp_path / 'new.sqlite3'}"
    )
    assert completed.returncode == 1, completed.stderr
    assert completed.stderr.startswith("CommandError: Database 'default' has not had "), (
        completed.stderr
    )
    assert completed.stderr.endswith(
        "of later_django's migrations applied (the first is 0001_initial), so its tables are "
        "missing or out of date. Run: python manage.py migrate --database default\n"
    ), completed.stderr
