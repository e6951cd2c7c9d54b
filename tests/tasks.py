"""Tasks the test suite enqueues; worker subprocesses import them by path."""

import os
import time

from django.db import connection
from django.tasks import task


def _record(kind: str, value: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO tests_execution (kind, value, pid, at) VALUES (%s, %s, %s, %s)",
            [kind, value, os.getpid(), time.time()],
        )


@task
def add(a, b):
    return a + b


@task
def noop():
    return None


@task
def record(kind, value):
    _record(kind, str(value))
    return value


@task
def sleep_then_record(kind, value, seconds):
    time.sleep(seconds)
    _record(kind, str(value))
    return value


@task(max_attempts=3, backoff="immediate")
def always_fails(message):
    raise RuntimeError(message)


@task(max_attempts=3, backoff={"policy": "fixed", "seconds": 0.2})
def fails_then_succeeds(kind, key, failures):
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM tests_execution WHERE kind = %s", [kind])
        seen = cursor.fetchone()[0]
    _record(kind, key)
    if seen < failures:
        raise ValueError(f"failure {seen + 1} of {failures}")
    return seen


@task(takes_context=True)
def report_attempt(context, kind):
    _record(kind, str(context.attempt))
    return context.attempt


@task
async def async_add(a, b):
    return a + b


@task(timeout=0.5)
def too_slow_python():
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pass


@task(timeout=0.5)
async def too_slow_async():
    import asyncio

    await asyncio.sleep(60)


@task(queue_name="emails")
def send_email(to):
    return f"sent to {to}"
