"""A task that raises SystemExit, KeyboardInterrupt or another BaseException fails like any
other: the worker records it, applies the retry policy and goes on with the next job."""

import pytest

from later_django.tasks_api import TaskResultStatus
from tests import tasks
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

CLASS_PATHS = {
    "SystemExit": "builtins.SystemExit",
    "KeyboardInterrupt": "builtins.KeyboardInterrupt",
    "GeneratorExit": "builtins.GeneratorExit",
    "NotAnError": "tests.tasks.NotAnError",
}


def test_base_exceptions_fail_the_job_and_the_burst_worker_goes_on_and_exits(run_burst):
    raised = []
    for name in CLASS_PATHS:
        raised.append((name, tasks.raises_base_exception.enqueue("base", name)))
        raised.append((name, tasks.async_raises_base_exception.enqueue("base", name)))
    after = tasks.record.enqueue("after", "ran")
    # Before the fix the first such job left its thread dead and the worker waiting for
    # it, so the burst never ended: a short timeout makes that a failure, not a hang.
    worker = run_burst("--concurrency", "1", timeout=60)

    for name, result in raised:
        result.refresh()
        assert result.status == TaskResultStatus.FAILED, worker.output()
        # Retried as any failure is (max_attempts=2), then failed with both errors kept.
        assert [e.exception_class_path for e in result.errors] == [CLASS_PATHS[name]] * 2
        assert all("Traceback (most recent call last)" in e.traceback for e in result.errors)
        assert all(name in e.traceback.splitlines()[-1] for e in result.errors)
    after.refresh()
    assert after.status == TaskResultStatus.SUCCESSFUL
    assert Execution.objects.filter(kind="base").count() == 2 * len(raised)
    assert f" failed={len(raised)} " in worker.output()
    assert f" retried={len(raised)} " in worker.output()


def test_system_exit_fails_the_job_with_its_traceback(run_burst):
    exits = tasks.raises_base_exception.enqueue("exit", "SystemExit")
    after = tasks.record.enqueue("after-exit", "ran")
    run_burst("--concurrency", "1", timeout=60)

    exits.refresh()
    assert exits.status == TaskResultStatus.FAILED
    assert exits.errors[-1].traceback.endswith("SystemExit: 3\n")
    assert "raise BASE_EXCEPTIONS[name]()" in exits.errors[-1].traceback
    after.refresh()
    assert after.status == TaskResultStatus.SUCCESSFUL
