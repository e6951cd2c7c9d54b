"""Enqueueing a continuation: the stage it starts in follows its parent's stage."""

from datetime import timedelta

import pytest
from django.db import transaction

from later_django.engine.outcomes import FAILED
from later_django.exceptions import InvalidArgument, JobNotFound
from later_django.jobs import cancel_job, get_job
from later_django.models import JobIndexRow, StorageValue
from later_django.tasks_api import TaskResultStatus, default_task_backend
from tests import tasks

from .inline import claim_ready, finish, has_command, stage_of

pytestmark = pytest.mark.django_db


def test_continuation_of_a_pending_parent_waits_without_a_queue_command():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    assert stage_of(child.id) == "waiting"
    assert not has_command(child.id)
    assert child.status == TaskResultStatus.READY
    assert get_job(child.id, namespace="tests").parent_id == parent.id
    assert default_task_backend.get_result(child.id).status == TaskResultStatus.READY


def test_continuation_accepts_a_job_id_as_well_as_a_task_result():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent.id).enqueue("chain", "child")
    row = JobIndexRow.objects.get(job_id=child.id)
    assert (row.stage, row.parent_job_id) == ("waiting", parent.id)


def test_continuation_of_a_running_parent_waits():
    parent = tasks.record.enqueue("chain", "parent")
    claim_ready()
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    assert stage_of(parent.id) == "running"
    assert stage_of(child.id) == "waiting"


def test_continuation_of_an_unknown_job_is_refused_and_nothing_is_stored():
    with pytest.raises(JobNotFound) as caught:
        tasks.record.using(after="01jzzzzzzzzzzzzzzzzzzzzzzz").enqueue("chain", "child")
    assert str(caught.value) == (
        "after is '01jzzzzzzzzzzzzzzzzzzzzzzz'; no job with that id exists in namespace "
        "'tests' (it may have expired), so there is nothing to continue."
    )
    assert not JobIndexRow.objects.exists()
    assert not StorageValue.objects.exists()


def test_after_that_is_neither_a_task_result_nor_an_id_is_refused():
    with pytest.raises(InvalidArgument) as caught:
        tasks.record.using(after=42).enqueue("chain", "child")
    assert str(caught.value) == (
        "after is 42; it must be a TaskResult or the id (a string) of a job."
    )


def test_continuation_of_a_succeeded_parent_is_runnable_at_once():
    parent = tasks.record.enqueue("chain", "parent")
    finish(claim_ready())
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    assert stage_of(child.id) == "enqueued"
    assert has_command(child.id)


def test_continuation_of_a_succeeded_parent_with_a_later_run_after_is_delayed():
    parent = tasks.record.enqueue("chain", "parent")
    finish(claim_ready())
    child = tasks.record.using(after=parent, run_after=timedelta(hours=1)).enqueue("c", "x")
    assert stage_of(child.id) == "delayed"
    assert not has_command(child.id)


def test_continuation_of_a_failed_parent_is_cancelled_at_once_naming_the_parent():
    parent = tasks.always_fails.enqueue("boom")
    finish(claim_ready(), FAILED)
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    assert child.status == TaskResultStatus.FAILED
    assert stage_of(child.id) == "cancelled"
    assert not has_command(child.id)
    view = get_job(child.id, namespace="tests")
    assert view.cancel_reason == (f"Cancelled because its parent job {parent.id!r} ended failed.")
    assert view.finished_at is not None
    assert default_task_backend.get_result(child.id).status == TaskResultStatus.FAILED


def test_continuation_of_a_cancelled_parent_is_cancelled_at_once():
    parent = tasks.record.enqueue("chain", "parent")
    cancel_job(parent.id, namespace="tests")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    assert stage_of(child.id) == "cancelled"
    assert get_job(child.id, namespace="tests").cancel_reason == (
        f"Cancelled because its parent job {parent.id!r} ended cancelled."
    )


def test_enqueue_many_makes_every_call_a_continuation_of_the_parent():
    parent = tasks.record.enqueue("chain", "parent")
    children = tasks.record.using(after=parent).enqueue_many(
        [(("chain", str(i)), {}) for i in range(3)]
    )
    rows = JobIndexRow.objects.filter(job_id__in=[c.id for c in children])
    assert {(r.stage, r.parent_job_id) for r in rows} == {("waiting", parent.id)}


def test_a_continuation_rolls_back_with_the_callers_transaction():
    parent = tasks.record.enqueue("chain", "parent")
    children = []

    def enqueue_then_fail():
        with transaction.atomic():
            children.append(tasks.record.using(after=parent).enqueue("chain", "child"))
            raise RuntimeError("the caller's work failed")

    with pytest.raises(RuntimeError, match="the caller's work failed"):
        enqueue_then_fail()
    assert not JobIndexRow.objects.filter(job_id=children[0].id).exists()
