import os
import time

from django.db import connection

from later_django import task


@task
def noop():
    return None


def _record_run(key: str, n: int, began: float) -> None:
    """Note one execution in the soak's own table, so the script can count runs afterwards."""
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO bench_soak_run (key, n, pid, started, finished) "
            "VALUES (%s, %s, %s, %s, %s)",
            [key, n, os.getpid(), began, time.time()],
        )


# A run cut off by a database restart fails; it is tried again rather than lost.
SOAK_RETRIES = {"max_attempts": 10, "backoff": {"policy": "fixed", "seconds": 0.5}}


@task(**SOAK_RETRIES)
def soak_plain(n: int, seconds: float = 0.0) -> None:
    began = time.time()
    time.sleep(seconds)
    _record_run("", n, began)


@task(topic="bench", **SOAK_RETRIES)
def soak_ordered(key: str, n: int, seconds: float = 0.0) -> None:
    began = time.time()
    time.sleep(seconds)
    _record_run(key, n, began)


# The same jobs run atomically: each run's row commits with its outcome, or not at all.
@task(atomic=True, **SOAK_RETRIES)
def soak_plain_atomic(n: int, seconds: float = 0.0) -> None:
    began = time.time()
    time.sleep(seconds)
    _record_run("", n, began)


@task(topic="bench", atomic=True, **SOAK_RETRIES)
def soak_ordered_atomic(key: str, n: int, seconds: float = 0.0) -> None:
    began = time.time()
    time.sleep(seconds)
    _record_run(key, n, began)
