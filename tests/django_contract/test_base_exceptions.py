"""Tasks that raise BaseException subclasses: the job fails, the worker goes on.

Django's ImmediateBackend records SystemExit as a failure and lets
KeyboardInterrupt reach the caller of ``enqueue()``, who is the person who
pressed Ctrl-C. In a worker the caller is the worker itself and a task's
KeyboardInterrupt is not a person's, so both end the job FAILED; the worker's
own shutdown comes from signals, not from task code.
"""

import pytest

from later_django.tasks_api import TaskResultStatus
from tests.django_contract import tasks
from tests.django_contract.matching import exactly
from tests.django_contract.runs import worker_run

pytestmark = [pytest.mark.django_db, pytest.mark.process]


def enqueue_base_exceptions():
    return {
        "system_exit": tasks.raises_system_exit.enqueue(),
        "keyboard_interrupt": tasks.raises_keyboard_interrupt.enqueue(),
        "exit": tasks.calls_exit.enqueue(),
        # Lowest priority: it runs after the three above, in the same worker.
        "after": tasks.answer.using(priority=-100).enqueue(),
    }


@pytest.fixture(scope="module")
def run(django_db_setup, django_db_blocker, tmp_path_factory):
    log = tmp_path_factory.mktemp("contract") / "worker.log"
    # The jobs take milliseconds; the bound only limits how long a hung worker costs.
    with worker_run(
        django_db_blocker, log, enqueue_base_exceptions, "--concurrency", "1", timeout=20
    ) as done:
        yield done


def assert_failed_with(result, exception, message):
    assert result.status == TaskResultStatus.FAILED
    with pytest.raises(ValueError, match=exactly("Task failed")):
        _ = result.return_value
    assert result.enqueued_at <= result.started_at <= result.finished_at
    [error] = result.errors
    assert error.exception_class is exception
    assert error.traceback.endswith(f"{exception.__name__}: {message}\n")


def test_system_exit_from_a_task_fails_the_job(run):
    # Django: tests/tasks/test_immediate_backend.py test_catches_exception (SystemExit)
    assert_failed_with(run.result("system_exit"), SystemExit, "leaving from a task")


def test_keyboard_interrupt_from_a_task_fails_the_job(run):
    # Django: tests/tasks/test_immediate_backend.py test_throws_keyboard_interrupt
    # (deliberate difference: there it reaches the caller of enqueue)
    assert_failed_with(
        run.result("keyboard_interrupt"), KeyboardInterrupt, "interrupted inside a task"
    )


def test_exit_from_a_task_fails_the_job(run):
    # Django: tests/tasks/tasks.py exit_task
    assert_failed_with(run.result("exit"), SystemExit, "3")


def test_the_worker_goes_on_after_a_base_exception(run):
    # Django: tests/tasks/test_immediate_backend.py test_catches_exception (the backend survives)
    assert run.result("after").return_value == 42
    assert run.exit_code == 0, run.output


def test_task_finished_is_sent_for_a_base_exception(run):
    # Django: tests/tasks/test_immediate_backend.py test_catches_exception (the error log)
    assert run.signals_of("system_exit") == [
        ("started", "RUNNING", "LaterBackend"),
        ("finished", "FAILED", "LaterBackend", "SystemExit"),
    ]
