"""Tasks the test suite enqueues; worker subprocesses import them by path."""

import asyncio
import os
import time
from datetime import timedelta

from django.db import connection

from later_django import task


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
def sleep_only(seconds):
    time.sleep(seconds)  # touches no database: it can finish while the database is away
    return seconds


@task
def sleep_then_record(kind, value, seconds):
    time.sleep(seconds)
    _record(kind, str(value))
    return value


@task
def runs_until_released(kind, value, gate):
    """Record a start, then wait (up to a minute) until the test records ``gate``, then end."""
    _record(f"{kind}:start", value)
    _wait_for_record(gate)
    _record(kind, value)


def _wait_for_record(kind: str, seconds: float = 60) -> None:
    """Wait until a row of ``kind`` is in tests_execution (``seconds`` at most)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1 FROM tests_execution WHERE kind = %s", [kind])
            if cursor.fetchone():
                return
        time.sleep(0.05)


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


@task(timeout=0.5)
def too_slow_blocking():
    # time.sleep blocks in C, so the interrupt cannot land: the worker must abandon the thread.
    time.sleep(30)


@task(timeout=0.5, max_attempts=2, backoff="immediate", takes_context=True)
def blocks_on_its_first_attempt(context, kind):
    if context.attempt == 1:
        time.sleep(30)  # in C: the interrupt cannot land, so this thread is abandoned
    _record(kind, str(context.attempt))


@task(max_attempts=3, backoff={"policy": "exponential", "base": 0.3, "factor": 2})
def fails_with_exponential_backoff(kind):
    _record(kind, "attempt")
    raise ValueError("exponential")


@task(max_attempts=4, backoff={"policy": "exponential_jitter", "base": 0.2, "maximum": 0.2})
def fails_with_jittered_backoff(kind):
    _record(kind, "attempt")
    raise ValueError("jitter")


def retry_only_value_errors(exception, task_result):
    """Retry ValueError after 0.1 s (as a timedelta); give up on anything else."""
    if isinstance(exception, ValueError):
        return timedelta(seconds=0.1)
    return None


@task(max_attempts=5, backoff=retry_only_value_errors)
def fails_with_given_error(kind, error):
    _record(kind, error)
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM tests_execution WHERE kind = %s", [kind])
        seen = cursor.fetchone()[0]
    if seen >= 2:
        raise TypeError(f"{error} then TypeError")
    raise ValueError(error)


@task(max_attempts=3, backoff="immediate", takes_context=True)
def fails_reporting_attempt(context, kind):
    _record(kind, str(context.attempt))
    raise RuntimeError(f"attempt {context.attempt}")


@task
def returns_unstorable():
    return {1, 2, 3}


@task(max_attempts=2, backoff={"policy": "fixed", "seconds": 60})
def fails_and_retries_in_a_minute(kind):
    _record(kind, "attempt")
    raise ValueError("retry me in a minute")


@task
def idles_in_a_transaction(kind, seconds):
    """Leave a transaction idle for ``seconds`` (a slow call to another service, say)."""
    from django.db import transaction

    with transaction.atomic():
        _record(kind, "begun")
        time.sleep(seconds)
        _record(kind, "committed")
    return seconds


class NotAnError(BaseException):
    """A BaseException that is not an Exception, as some libraries define for control flow."""


BASE_EXCEPTIONS = {
    "SystemExit": lambda: SystemExit(3),
    "KeyboardInterrupt": KeyboardInterrupt,
    "GeneratorExit": GeneratorExit,
    "NotAnError": lambda: NotAnError("escaped"),
}


@task(max_attempts=2, backoff="immediate")
def raises_base_exception(kind, name):
    _record(kind, name)
    raise BASE_EXCEPTIONS[name]()


@task(max_attempts=2, backoff="immediate")
async def async_raises_base_exception(kind, name):
    from asgiref.sync import sync_to_async

    await sync_to_async(_record)(kind, name)
    raise BASE_EXCEPTIONS[name]()


@task
def records_start_and_end(kind, seconds):
    """Record each run's start and end, so a run started twice shows as two starts."""
    _record(kind, "start")
    time.sleep(seconds)
    _record(kind, "end")


def unreachable_delay(exception, task_result):
    """A delay no datetime can hold (about 3e292 years)."""
    return 1e300


@task(max_attempts=3, backoff=unreachable_delay)
def fails_with_an_unreachable_retry(kind):
    _record(kind, "attempt")
    raise RuntimeError("no retry can be scheduled")


# The same Task reachable by a second path: a job must still name it by ``tests.tasks.add``.
add_under_another_name = add


def _until_cancelled(context, seconds: float = 60) -> bool:
    """Wait until the job's context says it was cancelled; whether it did, within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if context.cancel_requested:
            return True
        time.sleep(0.02)
    return False


@task(takes_context=True)
def stops_when_cancelled(context, kind, gate=None):
    """Record a start, look at ``context.cancel_requested`` until it turns true (a minute at
    most), record that it saw it, and return; with ``gate``, return only once the test has
    recorded ``gate`` too, so that it can look at the job while it is stopping."""
    _record(f"{kind}:start", context.task_result.id)
    if _until_cancelled(context):
        _record(f"{kind}:saw-cancel", context.task_result.id)
        if gate is not None:
            _wait_for_record(gate)
        return "stopped early"
    return "ran to the end"


@task
def ignores_cancel(kind):
    """Record a start, then keep busy in Python for a minute, never looking at a cancel."""
    _record(f"{kind}:start", "")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        time.sleep(0.02)
    _record(kind, "ran to the end")


@task
def blocks_ignoring_cancel(kind):
    """Record a start, then block in one C call, where no interrupt can land."""
    _record(f"{kind}:start", "")
    time.sleep(30)
    _record(kind, "ran to the end")


@task
async def async_ignores_cancel(kind):
    """Record a start, then wait on the event loop for a minute, never looking at a cancel."""
    from asgiref.sync import sync_to_async

    await sync_to_async(_record)(f"{kind}:start", "")
    await asyncio.sleep(60)
    await sync_to_async(_record)(kind, "ran to the end")


# -- atomic tasks: each attempt's writes commit with its outcome, or not at all --------------


@task(atomic=True)
def atomic_record(kind, value):
    _record(kind, str(value))
    return value


@task(atomic=True, max_attempts=3, backoff="immediate", takes_context=True)
def atomic_fails_then_succeeds(context, kind, failures):
    """Write, then fail on the first ``failures`` attempts: only the last attempt's write stays."""
    _record(kind, str(context.attempt))
    if context.attempt <= failures:
        raise ValueError(f"attempt {context.attempt} fails after writing")
    return context.attempt


@task(atomic=True, max_attempts=3, backoff="immediate", takes_context=True)
def atomic_write_then_wait(context, kind, marker, seconds):
    """Write, touch ``marker`` (a file: the write is not visible until it commits), then
    sleep ``seconds`` on the first attempt, where a test kills or freezes the worker."""
    _record(kind, str(context.attempt))
    with open(f"{marker}.{context.attempt}", "w") as f:
        f.write(str(os.getpid()))
    if context.attempt == 1:
        time.sleep(seconds)
    return context.attempt


@task(atomic=True, max_attempts=2, backoff="immediate", takes_context=True)
def atomic_loses_its_connection(context, kind):
    """Write, then (first attempt) end its own PostgreSQL session, so nothing can commit."""
    _record(kind, str(context.attempt))
    if context.attempt == 1:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
    return context.attempt


@task(atomic=True, takes_context=True)
def atomic_stops_when_cancelled(context, kind):
    """Write, then wait for the cancel and return: the job ends cancelled, its write undone."""
    _record(kind, "written")
    return "stopped early" if _until_cancelled(context) else "ran to the end"


@task
def record_session(kind, value):
    """Record the database session (PostgreSQL's backend pid) this run used."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        _record(kind, f"{value}:{cursor.fetchone()[0]}")


@task
def ends_its_session():
    """Have the server end this run's database session, as a restart or a pooler would."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")


@task
def fails_naming_a_bad_file(kind):
    """Fails with a message holding a name decoded with surrogateescape, as os.listdir
    returns a file name that is not UTF-8."""
    _record(kind, "ran")
    raise FileNotFoundError(f"no such file: {b'report-\xff.csv'.decode(errors='surrogateescape')}")
