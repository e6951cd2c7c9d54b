"""Atomic tasks (``@task(atomic=True)``): an attempt's writes commit with its outcome, or never.

The first tests run a burst worker in this process; the rest kill, freeze and
cancel real ``later_worker`` processes in the middle of an attempt, while its
writes are still uncommitted, and count what stayed: exactly one attempt's
writes per job. The soak's ``--atomic`` run (tests/worker/test_soak.py) does
the same under three kills spread over its jobs.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from django.db import connection

import later_django
from later_django.jobs import get_job
from later_django.models import JobIndexRow
from later_django.states import Stage
from later_django.tasks_api import TaskResultStatus
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution
from tests.worker.in_process import run_burst_in_process

pytestmark = pytest.mark.django_db(transaction=True)

postgres_only = pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PostgreSQL only: on SQLite an atomic task holds the one write lock while it runs",
)


def written(kind: str) -> list[str]:
    return list(Execution.objects.filter(kind=kind).order_by("id").values_list("value", flat=True))


def stage(job_id: str) -> str:
    return JobIndexRow.objects.get(job_id=job_id).stage


def test_the_writes_of_an_attempt_that_succeeds_commit_with_its_outcome():
    result = tasks.atomic_record.enqueue("atomic", 7)
    worker = run_burst_in_process()
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 7)
    assert written("atomic") == ["7"]
    assert worker.counts["success"] == 1


def test_a_failed_attempts_writes_are_undone_and_its_retry_starts_clean():
    result = tasks.atomic_fails_then_succeeds.enqueue("retried", 2)
    run_burst_in_process()
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 3)
    assert written("retried") == ["3"]  # attempts 1 and 2 wrote too, and were undone
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"] * 2
    assert "attempt 2 fails after writing" in result.errors[1].traceback


def test_a_job_that_fails_for_good_keeps_none_of_its_writes():
    result = tasks.atomic_fails_then_succeeds.enqueue("failed", 5)
    run_burst_in_process()
    result.refresh()
    assert result.status == TaskResultStatus.FAILED
    assert len(result.errors) == 3
    assert written("failed") == []


def test_a_plain_task_beside_it_keeps_its_writes_as_before():
    plain = tasks.record.enqueue("plain", 1)
    atomic = tasks.atomic_fails_then_succeeds.enqueue("atomic-failed", 5)
    run_burst_in_process()
    plain.refresh()
    atomic.refresh()
    assert (plain.status, atomic.status) == (TaskResultStatus.SUCCESSFUL, TaskResultStatus.FAILED)
    assert written("plain") == ["1"]
    assert written("atomic-failed") == []


@postgres_only
def test_a_transaction_that_cannot_commit_keeps_nothing_and_the_attempt_is_retried():
    result = tasks.atomic_loses_its_connection.enqueue("cut-off")
    run_burst_in_process()
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 2)
    assert written("cut-off") == ["2"]
    [error] = result.errors
    assert error.exception_class_path.startswith("django.db.utils.")
    view = get_job(result.id, namespace="tests")
    assert [a.outcome for a in view.record.attempts] == ["error", "success"]


def in_first_attempt(start_worker, tmp_path: Path, kind: str, seconds: float):
    """Enqueue an atomic job and start a worker; return both once the job's first attempt
    has written its row (not yet committed) and is sleeping ``seconds``."""
    marker = tmp_path / "attempt"
    result = tasks.atomic_write_then_wait.enqueue(kind, str(marker), seconds)
    worker = start_worker("--concurrency", "2")
    wait_for(lambda: Path(f"{marker}.1").exists(), timeout=30)
    return result, worker


@pytest.mark.process
def test_a_worker_killed_mid_attempt_leaves_no_writes_and_the_next_run_is_the_one_kept(
    start_worker, tmp_path: Path
):
    result, first = in_first_attempt(start_worker, tmp_path, "killed", 60)
    first.signal(signal.SIGKILL)
    first.wait(timeout=10)
    assert written("killed") == []
    start_worker("--concurrency", "2")
    wait_for(lambda: stage(result.id) == Stage.SUCCESS, timeout=30)
    assert written("killed") == ["2"]
    view = get_job(result.id, namespace="tests")
    assert [a.outcome for a in view.record.attempts] == ["lost", "success"]


@postgres_only
@pytest.mark.process
def test_a_frozen_worker_whose_lease_was_taken_over_rolls_its_writes_back_when_it_wakes(
    start_worker, tmp_path: Path
):
    result, frozen = in_first_attempt(start_worker, tmp_path, "frozen", 3)
    frozen.signal(signal.SIGSTOP)  # its heartbeats stop: the 2-second lease lapses
    try:
        start_worker("--concurrency", "2")
        wait_for(lambda: stage(result.id) == Stage.SUCCESS, timeout=30)
    finally:
        frozen.signal(signal.SIGCONT)
    # It wakes, finishes its first attempt and tries to store it with its writes: fenced.
    wait_for(lambda: f"fenced: job id={result.id}" in frozen.output(), timeout=30)
    assert written("frozen") == ["2"]
    result.refresh()
    assert (result.status, result.return_value) == (TaskResultStatus.SUCCESSFUL, 2)


@postgres_only
@pytest.mark.process
def test_a_cancelled_atomic_task_that_stops_keeps_none_of_its_writes(start_worker):
    result = tasks.atomic_stops_when_cancelled.enqueue("cancelled")
    start_worker("--concurrency", "2")
    wait_for(lambda: stage(result.id) == Stage.RUNNING, timeout=30)
    assert later_django.cancel(result.id, reason="not needed") == Stage.RUNNING
    wait_for(lambda: stage(result.id) == Stage.CANCELLED, timeout=30)
    view = get_job(result.id, namespace="tests")
    assert view.cancel_reason == "not needed"
    assert written("cancelled") == []
