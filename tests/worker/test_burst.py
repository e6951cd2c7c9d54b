import pytest

from later_django.tasks_api import TaskResultStatus, default_task_backend
from tests import tasks
from tests.db_state import stage_of
from tests.topics import tasks as topic_tasks
from tests.worker.in_process import burst_worker, run_burst_in_process

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def test_burst_worker_runs_every_runnable_job_and_exits(run_burst):
    results = [tasks.add.enqueue(i, 1) for i in range(5)]
    run_burst()
    for i, result in enumerate(results):
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
        assert result.return_value == i + 1
        assert len(result.worker_ids) == 1


def test_get_result_reads_a_job_finished_by_another_process(run_burst):
    result = tasks.always_fails.enqueue("boom")
    run_burst()
    fetched = default_task_backend.get_result(result.id)
    assert fetched.status == TaskResultStatus.FAILED
    assert [e.exception_class_path for e in fetched.errors] == ["builtins.RuntimeError"] * 3
    assert "RuntimeError: boom" in fetched.errors[-1].traceback


def test_a_burst_worker_runs_an_ordered_job_made_runnable_while_its_last_claim_looked():
    # The second job of a key becomes runnable when the first's outcome is stored. Here
    # that store lands while a claim that found nothing was looking, as it can when the
    # outcome writer's thread and the main loop race: the worker must look again.
    topic_tasks.step.using(partition_key="k").enqueue("k", 1)
    second = topic_tasks.step.using(partition_key="k").enqueue("k", 2)
    worker = burst_worker()
    claim = worker.topics.claim

    def claim_then_store(free, claim_queue):
        found = claim(free, claim_queue)
        if not found:
            worker.outcomes.store_now()
        return found

    worker.topics.claim = claim_then_store
    run_burst_in_process(worker)
    assert stage_of(second.id) == "success"
