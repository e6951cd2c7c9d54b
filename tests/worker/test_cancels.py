"""How a worker hears of cancels and what the outcome of a cancelled running job becomes.

In-process, through the worker's own claim, delivery and outcome code on the
real database; real worker processes are in test_cancelling.py.
"""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

import later_django
from later_django.context import LaterTaskContext
from later_django.engine.cancelling import cancel_by_id
from later_django.engine.claiming import claim
from later_django.engine.outcomes import CANCELLED, RELEASE, RETRY, SUCCESS, Outcome
from later_django.jobs import get_job
from later_django.models import DeliveryCommand, JobExecution, JobIndexRow
from later_django.states import Stage
from later_django.tasks_api import default_task_backend
from later_django.topics.context import context_for
from later_django.worker.cancels import deliver
from later_django.worker.config import WorkerConfig
from later_django.worker.executing import execute
from later_django.worker.runner import Worker
from later_django.worker.slots import Running
from tests import tasks
from tests.conftest import wait_for
from tests.continuations.inline import claim_ready, finish, stage_of
from tests.models import Execution

pytestmark = pytest.mark.django_db

DB = "default"


def test_an_attempt_that_fails_after_the_request_ends_cancelled_and_is_not_retried():
    job = tasks.always_fails.enqueue("boom")  # three attempts, retried at once
    child = tasks.record.using(after=job).enqueue("c", "child")
    [item] = claim_ready()
    later_django.cancel(job.id, reason="wrong customer")
    [written] = finish([item], RETRY, retry_at=None)
    assert written.kind == CANCELLED
    view = get_job(job.id, namespace="tests")
    assert (view.stage, view.cancel_reason) == (Stage.CANCELLED, "wrong customer")
    assert not DeliveryCommand.objects.filter(job_id=job.id).exists()
    assert stage_of(child.id) == Stage.CANCELLED


def test_a_success_the_worker_stored_before_hearing_of_the_request_stands():
    job = tasks.record.enqueue("c", "done")
    child = tasks.record.using(after=job).enqueue("c", "child")
    [item] = claim_ready()
    later_django.cancel(job.id, reason="too late")
    [written] = finish([item], SUCCESS)
    assert written.kind == SUCCESS
    view = get_job(job.id, namespace="tests")
    assert view.stage == Stage.SUCCESS
    assert view.cancel_reason is None
    history = [what for what, _ in view.history]
    assert "cancel requested" in history
    assert (
        "cancel requested (too late) reached the job after it had returned: its success stands"
        in history
    )
    assert stage_of(child.id) == Stage.ENQUEUED  # children follow the stage it ended in


def test_a_job_released_at_shutdown_after_the_request_ends_cancelled_with_its_attempt_undone():
    job = tasks.record.enqueue("c", "released")
    [item] = claim_ready()
    later_django.cancel(job.id)
    item.record.attempts.pop()  # as the worker's release does
    [written] = finish([item], RELEASE)
    assert written.kind == CANCELLED
    row = JobIndexRow.objects.get(job_id=job.id)
    assert (row.stage, row.attempts) == (Stage.CANCELLED, 0)
    assert not DeliveryCommand.objects.filter(job_id=job.id).exists()


def test_a_job_taken_over_with_a_request_in_its_record_ends_cancelled_without_running():
    job = tasks.record.enqueue("c", "never again")
    claim_ready()
    assert later_django.cancel(job.id) == Stage.RUNNING
    # Its worker stops: the lease lapses and another worker claims the job.
    JobExecution.objects.filter(job_id=job.id).update(lease_expires_at=timezone.now())
    DeliveryCommand.objects.filter(job_id=job.id).update(available_at=timezone.now())
    [item] = claim("tests", "other", queues=None, free=16, lease_seconds=30, using="default")
    outcome = execute(item, default_task_backend, "other")
    assert outcome.kind == CANCELLED
    assert [a.outcome for a in outcome.record.attempts] == ["lost", CANCELLED]
    assert not Execution.objects.exists()  # the task was not called


def test_a_heartbeat_flags_the_jobs_this_worker_holds_whose_cancel_was_asked():
    worker = Worker(WorkerConfig(install_signal_handlers=False))
    asked, other = tasks.record.enqueue("c", "asked"), tasks.record.enqueue("c", "other")
    claimed = []
    while batch := claim("tests", worker.id, queues=None, free=16, lease_seconds=30, using=DB):
        claimed += batch
    for item in claimed:
        worker.running[item.job_id] = Running(item=item)
    assert deliver(worker, 5.0) == []
    later_django.cancel(asked.id)
    assert deliver(worker, 5.0) == [asked.id]
    assert deliver(worker, 5.0) == []  # flagged once
    flags = {i.job_id: i.cancel.is_set() for i in claimed}
    assert flags == {asked.id: True, other.id: False}
    assert worker.running[asked.id].cancel_seen_at is not None
    assert worker.running[other.id].cancel_seen_at is None


@pytest.mark.django_db(transaction=True)
def test_an_outcome_that_waited_for_a_cancel_in_progress_sees_its_request(vendor):
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite's writers take turns, so they cannot overlap")
    job = tasks.always_fails.enqueue("boom")
    [item] = claim_ready()
    requested, release = threading.Event(), threading.Event()

    def cancel_and_hold() -> None:
        try:
            with transaction.atomic():
                cancel_by_id(job.id, namespace="tests", reason="held")
                requested.set()
                release.wait(30)
        finally:
            connections.close_all()

    holder = threading.Thread(target=cancel_and_hold)
    holder.start()
    written: list[Outcome] = []
    storer = threading.Thread(
        target=lambda: (written.extend(finish([item], RETRY)), connections.close_all())
    )
    try:
        assert requested.wait(30)
        storer.start()

        def outcome_waits_for_the_cancel() -> bool:
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'"
                )
                return cursor.fetchone() is not None

        wait_for(outcome_waits_for_the_cancel, timeout=30)
    finally:
        release.set()
        holder.join(30)
    storer.join(30)
    assert [o.kind for o in written] == [CANCELLED]
    assert get_job(job.id, namespace="tests").cancel_reason == "held"


def test_a_task_reads_cancel_requested_from_memory_without_a_query(django_assert_num_queries):
    job = tasks.report_attempt.enqueue("context")
    [item] = claim_ready()
    context = context_for(item, tasks.report_attempt.get_result(job.id))
    assert isinstance(context, LaterTaskContext)
    with django_assert_num_queries(0):
        assert not any(context.cancel_requested for _ in range(1000))
        item.cancel.set()  # what a heartbeat that found the request does
        assert context.cancel_requested
