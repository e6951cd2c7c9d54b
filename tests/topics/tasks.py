"""Ordered fixture tasks; worker subprocesses import them by path."""

import time

from django.db import connection

from later_django import task
from tests.tasks import _record


def _count(kind: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM tests_execution WHERE kind = %s", [kind])
        return cursor.fetchone()[0]


@task(topic="orders")
def step(key, n):
    _record(f"step:{key}", n)
    return n


@task(topic="orders")
def timed_step(key, n, seconds):
    """Record when it starts and ends, to show which jobs overlapped."""
    _record(f"start:{key}", n)
    time.sleep(seconds)
    _record(f"end:{key}", n)
    return n


@task(topic="orders", takes_context=True)
def report_context(context, key):
    value = f"{context.topic}|{context.partition}|{context.sequence}|{context.epoch}"
    _record(f"context:{key}", value)
    return context.epoch


@task(topic="orders", max_attempts=3, backoff={"policy": "fixed", "seconds": 0.5})
def flaky_step(key, n, failures):
    seen = _count(f"flaky:{key}")
    _record(f"flaky:{key}", n)
    if seen < failures:
        raise ValueError(f"failure {seen + 1} of {failures}")
    return n


@task(topic="orders", max_attempts=2, backoff="immediate")
def doomed_step(key, n):
    _record(f"doomed:{key}", n)
    raise RuntimeError(f"step {n} of {key} cannot succeed")


@task(topic="orders")
def chaos_step(key, n):
    _record(f"chaos:{key}", n)
    return n


@task(topic="orders", takes_context=True)
def slow_fenced_write(context, key, seconds):
    """Sleep, then write only if no run with a higher epoch wrote first (handler fencing)."""
    _record(f"begun:{key}", context.epoch)
    time.sleep(seconds)
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tests_execution (kind, value, pid, at) "
            "SELECT %s, %s, %s, %s WHERE NOT EXISTS (SELECT 1 FROM tests_execution "
            "WHERE kind = %s AND CAST(value AS INTEGER) > %s)",
            [
                f"fenced:{key}",
                str(context.epoch),
                _pid(),
                time.time(),
                f"fenced:{key}",
                context.epoch,
            ],
        )
        written = cursor.rowcount
    _record(f"wrote:{key}", f"{context.epoch}:{written}")
    return context.epoch


def _pid() -> int:
    import os

    return os.getpid()


@task(topic="orders", takes_context=True)
def long_first_run(context, key, seconds):
    """Run ``seconds`` under the partition's first lease and at once under any later one."""
    _record(f"run:{key}", context.epoch)
    if context.epoch == 1:
        time.sleep(seconds)
    return context.epoch


@task(topic="events")
def event(key, n):
    return n


@task(topic="orders", takes_context=True)
def ordered_stops_when_cancelled(context, key):
    """An ordered job that runs until it is cancelled (a minute at most)."""
    from tests.tasks import _until_cancelled

    _record(f"cancellable:{key}:start", context.task_result.id)
    stopped = _until_cancelled(context)
    _record(f"cancellable:{key}", "stopped" if stopped else "ran to the end")
