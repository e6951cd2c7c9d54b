"""Chains of continuations run by real worker processes."""

import pytest

from later_django.jobs import get_job
from later_django.tasks_api import TaskResultStatus
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def succeeded(result) -> bool:
    result.refresh()
    return result.status == TaskResultStatus.SUCCESSFUL


def values(kind: str) -> list[str]:
    return list(
        Execution.objects.filter(kind=kind).order_by("at", "id").values_list("value", flat=True)
    )


def test_a_chain_runs_link_by_link_in_order(start_worker):
    first = tasks.sleep_then_record.enqueue("chain", "1", 0.3)
    second = tasks.record.using(after=first).enqueue("chain", "2")
    third = tasks.sleep_then_record.using(after=second).enqueue("chain", "3", 0.1)
    fourth = tasks.record.using(after=third).enqueue("chain", "4")
    start_worker("--concurrency", "4")
    wait_for(lambda: succeeded(fourth), timeout=30)
    assert values("chain") == ["1", "2", "3", "4"]
    assert all(succeeded(result) for result in (first, second, third))


def test_a_continuation_enqueued_while_its_parent_runs_follows_it(start_worker):
    parent = tasks.sleep_then_record.enqueue("live", "parent", 1.0)
    start_worker()
    wait_for(lambda: get_job(parent.id, namespace="tests").stage == "running", timeout=20)
    child = tasks.record.using(after=parent).enqueue("live", "child")
    wait_for(lambda: succeeded(child), timeout=20)
    assert values("live") == ["parent", "child"]


def test_a_parent_releases_all_of_its_children(run_burst):
    parent = tasks.record.enqueue("fan", "parent")
    children = [tasks.record.using(after=parent).enqueue("fan", f"child-{i}") for i in range(5)]
    run_burst()
    assert values("fan")[0] == "parent"
    assert sorted(values("fan")[1:]) == [f"child-{i}" for i in range(5)]
    for child in children:
        child.refresh()
        assert child.status == TaskResultStatus.SUCCESSFUL


def test_a_failed_parent_cancels_its_descendants_which_never_run(run_burst):
    parent = tasks.always_fails.enqueue("boom")
    child = tasks.record.using(after=parent).enqueue("doomed", "child")
    grandchild = tasks.record.using(after=child).enqueue("doomed", "grandchild")
    bystander = tasks.record.enqueue("doomed", "bystander")
    run_burst()
    assert values("doomed") == ["bystander"]
    assert get_job(parent.id, namespace="tests").stage == "failed"
    child_view = get_job(child.id, namespace="tests")
    assert (child_view.stage, child_view.cancel_reason) == (
        "cancelled",
        f"Cancelled because its parent job {parent.id!r} ended failed.",
    )
    assert get_job(grandchild.id, namespace="tests").cancel_reason == (
        f"Cancelled because its parent job {child.id!r} ended cancelled."
    )
    assert child_view.attempts == 0
    bystander.refresh()
    assert bystander.status == TaskResultStatus.SUCCESSFUL


def test_a_parent_that_succeeds_after_a_retry_releases_its_child(start_worker):
    parent = tasks.fails_then_succeeds.enqueue("flaky", "parent", 1)
    child = tasks.record.using(after=parent).enqueue("flaky-child", "child")
    start_worker()
    wait_for(lambda: succeeded(child), timeout=30)
    assert values("flaky") == ["parent", "parent"]
    assert values("flaky-child") == ["child"]
