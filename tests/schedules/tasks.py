"""Tasks the schedule tests run; worker subprocesses import them by path."""

import time

from later_django.tasks_api import task
from tests.tasks import _record


@task
def spans(kind, seconds):
    """Record when this run started and ended, to show whether runs overlapped."""
    started = time.time()
    time.sleep(seconds)
    _record(kind, f"{started:.6f}-{time.time():.6f}")


@task(priority=5, queue_name="slow")
def tick(kind, label="tick"):
    _record(kind, label)
    return label


@task(takes_context=True)
def spans_then_continue(context, kind, seconds):
    """Record this run's span, then chain ``follow_up`` to run after it."""
    started = time.time()
    time.sleep(seconds)
    follow_up.using(after=context.task_result.id).enqueue(kind, seconds)
    _record(kind, f"{started:.6f}-{time.time():.6f}")


@task
def follow_up(kind, seconds):
    started = time.time()
    time.sleep(seconds)
    _record(kind, f"{started:.6f}-{time.time():.6f}")
