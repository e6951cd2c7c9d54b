"""A parent's outcome settles its waiting children in the same transaction."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.utils import timezone

from later_django.engine.outcomes import FAILED, RELEASE, RETRY
from later_django.exceptions import InvalidTransition
from later_django.jobs import cancel_job, get_job, retry_job
from tests import tasks

from .inline import claim_ready, finish, has_command, stage_of

pytestmark = pytest.mark.django_db


def reason(parent_id: str, stage: str) -> str:
    return f"Cancelled because its parent job {parent_id!r} ended {stage}."


def test_success_releases_every_waiting_child_with_a_queue_command():
    parent = tasks.record.enqueue("chain", "parent")
    children = [tasks.record.using(after=parent).enqueue("chain", str(i)) for i in range(3)]
    grandchild = tasks.record.using(after=children[0]).enqueue("chain", "grandchild")
    finish(claim_ready())
    for child in children:
        assert (stage_of(child.id), has_command(child.id)) == ("enqueued", True)
    assert (stage_of(grandchild.id), has_command(grandchild.id)) == ("waiting", False)


def test_a_released_child_with_a_future_run_after_becomes_delayed():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent, run_after=timedelta(hours=1)).enqueue("c", "x")
    finish(claim_ready())
    assert (stage_of(child.id), has_command(child.id)) == ("delayed", False)


def test_failure_cancels_children_and_grandchildren_each_naming_its_parent():
    parent = tasks.always_fails.enqueue("boom")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    grandchild = tasks.record.using(after=child).enqueue("chain", "grandchild")
    finish(claim_ready(), FAILED)
    assert stage_of(parent.id) == "failed"
    child_view = get_job(child.id, namespace="tests")
    grandchild_view = get_job(grandchild.id, namespace="tests")
    assert (child_view.stage, child_view.cancel_reason) == (
        "cancelled",
        reason(parent.id, "failed"),
    )
    assert (grandchild_view.stage, grandchild_view.cancel_reason) == (
        "cancelled",
        reason(child.id, "cancelled"),
    )
    assert child_view.finished_at is not None
    assert not has_command(child.id)
    assert not has_command(grandchild.id)


def test_a_retry_or_a_release_of_the_parent_leaves_children_waiting():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    finish(claim_ready(), RETRY, retry_at=timezone.now() + timedelta(hours=1))
    assert (stage_of(parent.id), stage_of(child.id)) == ("requeued", "waiting")
    other = tasks.record.enqueue("chain", "other")
    sibling = tasks.record.using(after=other).enqueue("chain", "sibling")
    finish(claim_ready(), RELEASE)
    assert (stage_of(other.id), stage_of(sibling.id)) == ("enqueued", "waiting")


def test_children_are_released_only_if_the_parents_outcome_commits():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    claimed = claim_ready()

    def finish_then_crash():
        with transaction.atomic():
            finish(claimed)
            assert (stage_of(parent.id), stage_of(child.id)) == ("success", "enqueued")
            raise RuntimeError("crash before commit")

    with pytest.raises(RuntimeError, match="crash before commit"):
        finish_then_crash()
    assert (stage_of(parent.id), stage_of(child.id)) == ("running", "waiting")
    assert not has_command(child.id)


def test_a_fenced_outcome_settles_no_children():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    [claimed] = claim_ready()
    claimed.epoch += 1  # as if another worker had taken the lease over
    assert finish([claimed]) == []
    assert stage_of(child.id) == "waiting"


def test_cancelling_a_job_cancels_its_waiting_descendants():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    grandchild = tasks.record.using(after=child).enqueue("chain", "grandchild")
    cancel_job(parent.id, namespace="tests", reason="changed my mind")
    assert get_job(parent.id, namespace="tests").cancel_reason == "changed my mind"
    assert get_job(child.id, namespace="tests").cancel_reason == reason(parent.id, "cancelled")
    assert get_job(grandchild.id, namespace="tests").cancel_reason == reason(child.id, "cancelled")


# retry_job raises from inside its write block, which would mark a surrounding
# atomic block (the test's own) as needing rollback.
@pytest.mark.django_db(transaction=True)
def test_retrying_a_child_whose_parent_failed_is_refused_naming_the_parent():
    parent = tasks.always_fails.enqueue("boom")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    finish(claim_ready(), FAILED)
    with pytest.raises(InvalidTransition) as caught:
        retry_job(child.id, namespace="tests")
    assert str(caught.value) == (
        f"Job {child.id!r} continues job {parent.id!r}, which is failed; retry the parent "
        "first, then this job."
    )
    assert stage_of(child.id) == "cancelled"


def test_a_retried_child_waits_again_for_its_retried_parent():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    finish(claim_ready(), FAILED)
    retry_job(parent.id, namespace="tests")
    retry_job(child.id, namespace="tests")
    assert (stage_of(child.id), has_command(child.id)) == ("waiting", False)
    assert get_job(child.id, namespace="tests").cancel_reason is None
    [claimed] = claim_ready()
    assert claimed.job_id == parent.id
    finish([claimed])
    assert (stage_of(child.id), has_command(child.id)) == ("enqueued", True)


def test_retrying_a_cancelled_child_of_a_succeeded_parent_runs_it_now():
    parent = tasks.record.enqueue("chain", "parent")
    child = tasks.record.using(after=parent).enqueue("chain", "child")
    cancel_job(child.id, namespace="tests")
    finish(claim_ready())
    retry_job(child.id, namespace="tests")
    assert (stage_of(child.id), has_command(child.id)) == ("enqueued", True)
