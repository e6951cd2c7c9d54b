import pytest

from later_django.tasks_api import TaskResultStatus, default_task_backend
from tests import tasks

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
