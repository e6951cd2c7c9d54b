"""``manage.py later_health``: its checks, output, JSON and exit codes, against real workers."""

from __future__ import annotations

import io
import json
import subprocess
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from later_django.models import DeliveryCommand, JobIndexRow, Worker
from tests import tasks
from tests.conftest import DUMMY_BACKEND, manage, wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def health(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return manage("later_health", *args, **env)


def in_process(*args: str) -> tuple[int, str]:
    """Run the command with call_command; return its exit code and what it printed."""
    out = io.StringIO()
    try:
        call_command("later_health", *args, stdout=out)
    except CommandError as e:
        return e.returncode, out.getvalue()
    return 0, out.getvalue()


def beat(seconds_ago: float, worker_id: str = "host:1:abcdef") -> None:
    """Write a worker heartbeat row as a worker would have that long ago."""
    at = timezone.now() - timedelta(seconds=seconds_ago)
    Worker.objects.create(
        namespace="tests",
        worker_id=worker_id,
        hostname="host",
        pid=1,
        concurrency=4,
        started_at=at,
        heartbeat_at=at,
    )


@pytest.mark.process
def test_without_a_worker_the_backend_is_unhealthy_and_exits_1():
    completed = health()
    assert completed.returncode == 1, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[0].startswith("ok database: answers in ")
    assert lines[0].endswith(" ms")
    assert lines[1:] == [
        "ok migrations: every later migration is applied",
        "FAIL workers: 0 of 1 required sent a heartbeat within 30 s",
    ]
    assert completed.stderr == "CommandError: Backend 'default' is unhealthy: workers failed.\n"


@pytest.mark.process
def test_with_a_live_worker_the_backend_is_healthy_and_exits_0(start_worker):
    start_worker()
    wait_for(lambda: Worker.objects.filter(namespace="tests").exists())
    completed = health("--json")
    assert completed.returncode == 0, completed.stdout + completed.stderr
    report = json.loads(completed.stdout)
    assert report["healthy"] is True
    assert (report["backend"], report["namespace"], report["database"]) == (
        "default",
        "tests",
        "default",
    )
    assert [c["name"] for c in report["checks"]] == ["database", "migrations", "workers"]
    assert all(c["ok"] for c in report["checks"])
    workers = report["checks"][2]
    assert (workers["alive"], workers["required"], workers["heartbeat_within_seconds"]) == (
        1,
        1,
        30.0,
    )
    assert isinstance(report["checks"][0]["milliseconds"], float)
    assert completed.stderr == ""


@pytest.mark.process
def test_more_workers_required_than_are_running_is_unhealthy(start_worker):
    start_worker()
    wait_for(lambda: Worker.objects.filter(namespace="tests").exists())
    code, out = in_process("--min-workers", "2")
    assert code == 1
    assert "FAIL workers: 1 of 2 required sent a heartbeat within 30 s" in out.splitlines()
    assert in_process("--min-workers", "1")[0] == 0


def test_only_heartbeats_within_the_window_count():
    beat(10)
    code, out = in_process("--heartbeat-within", "5")
    assert code == 1
    assert "FAIL workers: 0 of 1 required sent a heartbeat within 5 s" in out
    code, out = in_process("--heartbeat-within", "60")
    assert code == 0
    assert "ok workers: 1 of 1 required sent a heartbeat within 60 s" in out


def test_the_heartbeat_window_defaults_to_the_dead_after_setting():
    beat(10)
    with override_settings(LATER_WORKER_DEAD_AFTER=5):
        assert in_process()[0] == 1
    with override_settings(LATER_WORKER_DEAD_AFTER=15):
        assert in_process()[0] == 0


def test_min_workers_zero_needs_no_worker():
    code, out = in_process("--min-workers", "0")
    assert code == 0
    assert "ok workers: 0 of 0 required sent a heartbeat within 30 s" in out


def test_a_ready_job_older_than_the_limit_is_unhealthy():
    beat(0)
    code, out = in_process("--max-ready-age", "60", "--json")
    assert code == 0
    queue = json.loads(out)["checks"][-1]
    assert queue == {
        "name": "queue",
        "ok": True,
        "message": "no job is waiting to run",
        "oldest_ready_age_seconds": None,
        "max_ready_age_seconds": 60.0,
    }
    job = tasks.add.enqueue(1, 2)
    tasks.add.using(run_after=timedelta(hours=2)).enqueue(1, 2)  # delayed: not ready
    # Ready two minutes ago, as if no worker had come since.
    ready_at = timezone.now() - timedelta(seconds=120)
    JobIndexRow.objects.filter(job_id=job.id).update(transitioned_at=ready_at)
    DeliveryCommand.objects.filter(job_id=job.id).update(available_at=ready_at)
    code, out = in_process("--max-ready-age", "60")
    assert code == 1
    last = out.splitlines()[-1]
    assert last.startswith("FAIL queue: the oldest ready job has waited 12")
    assert last.endswith(" s (at most 60 s allowed)")
    assert in_process("--max-ready-age", "300")[0] == 0
    assert in_process()[1].splitlines()[-1].startswith("ok workers")  # off by default


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--min-workers", "-1"), "--min-workers is '-1'; it must be a whole number >= 0."),
        (("--min-workers", "1.5"), "--min-workers is '1.5'; it must be a whole number >= 0."),
        (
            ("--heartbeat-within", "soon"),
            "--heartbeat-within is 'soon'; it must be a finite number of seconds >= 0.",
        ),
        (
            ("--max-ready-age", "inf"),
            "--max-ready-age is 'inf'; it must be a finite number of seconds >= 0.",
        ),
        (
            ("--backend", "nope"),
            "Task backend 'nope' is not in settings.TASKS; its aliases are default.",
        ),
    ],
)
def test_bad_flags_are_misconfiguration_exit_2(args, message):
    with pytest.raises(CommandError) as caught:
        call_command("later_health", *args, stdout=io.StringIO())
    assert str(caught.value) == message
    assert caught.value.returncode == 2


def test_a_backend_that_is_not_later_is_misconfiguration(settings):
    dummy = {"BACKEND": DUMMY_BACKEND}
    with (
        override_settings(TASKS={**settings.TASKS, "dummy": dummy}),
        pytest.raises(CommandError) as caught,
    ):
        call_command("later_health", "--backend", "dummy", stdout=io.StringIO())
    assert str(caught.value) == (
        "Task backend 'dummy' is DummyBackend; later_health needs one whose BACKEND is "
        "'later_django.backend.LaterBackend'."
    )
    assert caught.value.returncode == 2


@pytest.mark.process
def test_a_bad_flag_exits_2_from_the_command_line():
    completed = health("--backend", "nope")
    assert completed.returncode == 2
    assert completed.stderr == (
        "CommandError: Task backend 'nope' is not in settings.TASKS; its aliases are default.\n"
    )
    assert health("--min-workers", "many").returncode == 2


@pytest.mark.process
def test_a_database_without_the_later_tables_fails_the_migrations_check(tmp_path):
    # A fresh SQLite file stands for any database `migrate` has not been run on.
    completed = manage(
        "later_health", "--json", database_url=f"sqlite:///{tmp_path / 'new.sqlite3'}"
    )
    assert completed.returncode == 1, completed.stderr
    report = json.loads(completed.stdout)
    assert report["healthy"] is False
    database, migrations = report["checks"]  # nothing else is looked at
    assert database["ok"] is True
    assert migrations["ok"] is False
    assert migrations["message"].startswith("Database 'default' has not had ")
    assert migrations["message"].endswith("Run: python manage.py migrate --database default")


@pytest.mark.process
def test_a_database_that_does_not_answer_fails_the_first_check(tmp_path):
    completed = manage("later_health", database_url="postgresql://postgres@127.0.0.1:1/nothing")
    assert completed.returncode == 1, completed.stderr
    (line,) = completed.stdout.splitlines()
    assert line.startswith("FAIL database: 'default' does not answer: ")
    assert completed.stderr == ("CommandError: Backend 'default' is unhealthy: database failed.\n")
