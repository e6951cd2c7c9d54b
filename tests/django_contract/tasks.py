"""Fixture tasks for the contract suite; worker subprocesses import them by path.

The receivers at the bottom record Django's ``task_started`` and
``task_finished`` signals for these tasks in ``tests_execution``, so a test can
see what a worker process sent.
"""

import os
import sys
import time

from django.db import connection
from django.dispatch import receiver

import later_django
from later_django.tasks_api import TaskContext, task, task_finished, task_started


@task()
def noop(*args, **kwargs):
    return None


@task
def noop_from_bare_decorator(*args, **kwargs):
    return None


@task()
async def noop_async(*args, **kwargs):
    return None


@task()
def answer():
    return 42


@task()
async def answer_async():
    return 42


@task()
def echo(*args, **kwargs):
    return {"args": args, "kwargs": kwargs}


@task()
def returns_tuple():
    return (1, "two", (3.5, None))


@task()
def returns_a_function():
    return answer.func  # neither JSON nor anything a job record could hold


@task()
def fails_with_value_error(message):
    raise ValueError(message)


@task()
def fails_with_nested_exception():
    raise ValueError(KeyError("inner problem"))


@task()
def raises_system_exit():
    raise SystemExit("leaving from a task")


@task()
def raises_keyboard_interrupt():
    raise KeyboardInterrupt("interrupted inside a task")


@task()
def calls_exit():
    sys.exit(3)


@task(takes_context=True)
def returns_own_id(context):
    return context.task_result.id


@task(takes_context=True)
def describes_context(context, label):
    assert isinstance(context, TaskContext)
    return {
        "label": label,
        "attempt": context.attempt,
        "status": context.task_result.status,
        "args": context.task_result.args,
        "worker_ids": len(context.task_result.worker_ids),
    }


@later_django.task(takes_context=True, max_attempts=2, backoff="immediate")
def succeeds_on_second_attempt(context):
    if context.attempt == 1:
        raise RuntimeError("first attempt fails on purpose")
    return context.attempt


def _record(kind: str, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tests_execution (kind, value, pid, at) VALUES (%s, %s, %s, %s)",
            [kind, value, os.getpid(), time.time()],
        )


def _ours(task_result) -> bool:
    return task_result.task.module_path.startswith(f"{__name__}.")


@receiver(task_started)
def record_started(sender, task_result, **kwargs):
    if _ours(task_result):
        _record("started", f"{task_result.id} {task_result.status} {sender.__name__}")


@receiver(task_finished)
def record_finished(sender, task_result, **kwargs):
    if _ours(task_result):
        # Django's own receiver logs sys.exc_info(): it must be the task's error, if any.
        error = type(sys.exc_info()[1]).__name__
        _record("finished", f"{task_result.id} {task_result.status} {sender.__name__} {error}")
