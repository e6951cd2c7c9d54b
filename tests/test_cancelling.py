"""later_django.cancel(): pending jobs end at once, running ones are asked, finished ones refuse.

In-process, through the worker's own claim and outcome code; real worker
processes are in tests/worker/test_cancelling.py.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

import later_django
from later_django.engine.outcomes import FAILED, SUCCESS
from later_django.exceptions import InvalidArgument, InvalidTransition, JobNotFound
from later_django.jobs import get_job, retry_job
from later_django.models import JobExecution, JobIndexRow, PartitionHead
from later_django.states import Stage
from tests import tasks
from tests.continuations.inline import claim_ready, finish, stage_of
from tests.topics import helpers as topic
from tests.topics import tasks as topic_tasks

pytestmark = pytest.mark.django_db


def requested_at(job_id: str):
    return JobIndexRow.objects.get(job_id=job_id).cancel_requested_at


def test_a_pending_job_and_its_waiting_children_end_cancelled_at_once():
    delayed = tasks.record.using(run_after=timedelta(hours=1)).enqueue("c", "delayed")
    child = tasks.record.using(after=delayed).enqueue("c", "child")
    assert later_django.cancel(delayed.id, reason="order withdrawn") == Stage.CANCELLED
    view = get_job(delayed.id, namespace="tests")
    assert (view.stage, view.cancel_reason) == (Stage.CANCELLED, "order withdrawn")
    child_view = get_job(child.id, namespace="tests")
    assert child_view.stage == Stage.CANCELLED
    assert child_view.cancel_reason == (
        f"Cancelled because its parent job {delayed.id!r} ended cancelled."
    )


def test_cancel_takes_a_task_result_and_has_a_default_reason():
    result = tasks.record.enqueue("c", "x")
    assert later_django.cancel(result) == Stage.CANCELLED
    view = get_job(result.id, namespace="tests")
    assert view.cancel_reason == "Cancelled through later_django.cancel()."


def test_a_finished_job_is_refused_naming_its_stage_and_what_can_be_cancelled():
    done = tasks.record.enqueue("c", "done")
    finish(claim_ready(), SUCCESS)
    with pytest.raises(InvalidTransition) as raised:
        later_django.cancel(done.id)
    assert str(raised.value) == (
        f"Job {done.id!r} has already finished (success), so there is nothing to cancel; "
        "only delayed, waiting, enqueued, running, requeued jobs can be cancelled."
    )
    assert stage_of(done.id) == Stage.SUCCESS


def test_an_unknown_job_is_not_found():
    with pytest.raises(JobNotFound, match="No job '01jnone' exists in namespace 'tests'"):
        later_django.cancel("01jnone")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda: later_django.cancel(42),
            "result_id is 42; it must be a job's id (a string) or its TaskResult.",
        ),
        (
            lambda: later_django.cancel("01j", reason=7),
            "reason is 7; it must be a string of at most 2000 characters, or None.",
        ),
        (
            lambda: later_django.cancel("01j", backend="nope"),
            "backend is 'nope', which is not a TASKS alias.",
        ),
    ],
    ids=["result_id", "reason", "backend"],
)
def test_bad_arguments_are_refused_naming_the_value(call, message):
    with pytest.raises(InvalidArgument) as raised:
        call()
    assert str(raised.value) == message


def test_a_running_job_is_asked_to_stop_and_asking_again_changes_nothing():
    running = tasks.record.enqueue("c", "running")
    claim_ready()
    assert later_django.cancel(running.id, reason="first") == Stage.RUNNING
    first = requested_at(running.id)
    assert first is not None
    assert later_django.cancel(running.id, reason="second") == Stage.RUNNING
    assert requested_at(running.id) == first
    view = get_job(running.id, namespace="tests")
    assert (view.stage, view.cancel_reason) == (Stage.RUNNING, "first")
    assert "cancel requested" in [what for what, _ in view.history]


def test_a_running_job_whose_lease_lapsed_ends_at_once_and_its_worker_is_fenced():
    stalled = tasks.record.enqueue("c", "stalled")
    [item] = claim_ready()
    JobExecution.objects.filter(job_id=stalled.id).update(lease_expires_at=timezone.now())
    assert later_django.cancel(stalled.id, reason="worker gone") == Stage.CANCELLED
    assert stage_of(stalled.id) == Stage.CANCELLED
    assert finish([item], SUCCESS) == []  # the old worker's late outcome is refused
    view = get_job(stalled.id, namespace="tests")
    assert (view.stage, view.cancel_reason) == (Stage.CANCELLED, "worker gone")
    assert any("lease of its worker test-process had lapsed" in what for what, _ in view.history)


def test_a_running_head_whose_lease_lapsed_moves_its_partition_on():
    head = topic_tasks.step.using(partition_key="k").enqueue("k", 0)
    behind = topic_tasks.step.using(partition_key="k").enqueue("k", 1)
    [item] = topic.claim("worker-a")
    assert item.job_id == head.id
    topic.lapse()
    JobExecution.objects.filter(job_id=head.id).update(lease_expires_at=timezone.now())
    assert later_django.cancel(head.id) == Stage.CANCELLED
    assert PartitionHead.objects.get(topic="orders").job_id == behind.id
    [following] = topic.claim("worker-b")
    assert following.job_id == behind.id


def test_retrying_a_cancelled_job_clears_its_request_so_it_can_succeed():
    job = tasks.record.enqueue("c", "again")
    [item] = claim_ready()
    later_django.cancel(job.id, reason="stop")
    finish([item], FAILED)
    assert stage_of(job.id) == Stage.CANCELLED
    retry_job(job.id, namespace="tests")
    assert requested_at(job.id) is None
    assert get_job(job.id, namespace="tests").record.cancel_requested_at is None
    finish(claim_ready(), SUCCESS)
    assert stage_of(job.id) == Stage.SUCCESS
