"""Fixtures shared by the whole suite: the database vendor and real worker processes."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from django.db import connection, connections, transaction
from django.db.models import QuerySet

from later_django.tasks_api import DummyBackend

ROOT = Path(__file__).resolve().parent.parent
# Django's DummyBackend, from django.tasks or (Django 5.2) the django-tasks backport.
DUMMY_BACKEND = f"{DummyBackend.__module__}.{DummyBackend.__qualname__}"


def postgres_session(**options: object):
    """A psycopg connection of its own to the test database (PostgreSQL), outside Django."""
    import psycopg

    settings = connection.settings_dict
    return psycopg.connect(
        host=settings["HOST"] or None,
        port=settings["PORT"] or None,
        user=settings["USER"],
        dbname=settings["NAME"],
        **options,
    )


@pytest.fixture
def vendor() -> str:
    return connection.vendor


def worker_env(**extra: str) -> dict[str, str]:
    """Environment for a subprocess that opens this test run's database."""
    env = dict(os.environ)
    env["DJANGO_SETTINGS_MODULE"] = "tests.settings"
    env["LATER_TEST_DATABASE_NAME"] = str(connection.settings_dict["NAME"])
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def manage(
    *args: str, database_url: str | None = None, timeout: float = 60, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run ``manage.py *args`` in a subprocess on this run's database, or on ``database_url``."""
    environment = worker_env(**env)
    if database_url is not None:
        environment["DATABASE_URL"] = database_url
        environment.pop("LATER_TEST_DATABASE_NAME")
    return subprocess.run(
        [sys.executable, "-m", "django", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


class WorkerProcess:
    """A real ``manage.py later_worker`` subprocess."""

    def __init__(self, args: list[str], log_path: Path, env: dict[str, str]) -> None:
        self.log_path = log_path
        self.log = open(log_path, "wb")  # noqa: SIM115  (closed in stop())
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "later_worker", *args],
            cwd=ROOT,
            env=env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Callable[..., WorkerProcess]]:
    """Start ``later_worker`` subprocesses on the test database; all are killed at teardown."""
    started: list[WorkerProcess] = []

    def start(*args: str, log_level: str = "INFO", **env: str) -> WorkerProcess:
        log = tmp_path / f"worker-{len(started)}.log"
        process = WorkerProcess(list(args), log, worker_env(LATER_TEST_LOG_LEVEL=log_level, **env))
        started.append(process)
        return process

    yield start
    for process in started:
        process.stop()


@pytest.fixture
def run_burst(start_worker: Callable[..., WorkerProcess]) -> Callable[..., WorkerProcess]:
    """Run one ``later_worker --burst`` to completion and return it (exit code checked)."""

    def run(*args: str, timeout: float = 60, **env: str) -> WorkerProcess:
        process = start_worker("--burst", *args, **env)
        code = process.wait(timeout=timeout)
        assert code == 0, f"worker exited {code}:\n{process.output()}"
        return process

    return run


def wait_for(condition: Callable[[], bool], timeout: float = 30, step: float = 0.05) -> None:
    """Poll ``condition`` until it is true; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(step)
    raise AssertionError(f"condition not met within {timeout}s: {condition.__doc__ or condition}")


@contextmanager
def held_by_another_connection(take: Callable[[], object]) -> Iterator[None]:
    """Run ``take`` in a transaction on another connection (in a thread of its own) and
    keep that transaction, with the locks ``take`` took, open until the block ends.

    What ``take`` reads must be committed (``transaction=True``) for that
    connection to see it.
    """
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with transaction.atomic():
                take()
                holding.set()
                release.wait(60)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10), "the other connection could not take its locks"
        yield
    finally:
        release.set()
        holder.join()


def seconds_while_locked(rows: list[QuerySet], action: Callable[[], object]) -> float:
    """Run ``action`` while another connection holds a row lock on each of ``rows``
    (one row each, as a claim or an outcome statement in progress would); return
    its seconds."""

    def lock() -> None:
        for queryset in rows:
            queryset.select_for_update().get()

    with held_by_another_connection(lock):
        began = time.monotonic()
        action()
        return time.monotonic() - began


def holds_a_transaction() -> bool:
    """Whether another connection is inside a write transaction on the test database."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%%'"
            )
            return cursor.fetchone()[0] > 0
    probe = sqlite3.connect(connection.settings_dict["NAME"], timeout=0)
    try:
        probe.execute("BEGIN IMMEDIATE")
        probe.execute("ROLLBACK")
        return False
    except sqlite3.OperationalError:
        return True
    finally:
        probe.close()


def stopped(pid: int) -> bool:
    """Whether every thread of process ``pid`` is stopped (Linux)."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        with contextlib.suppress(OSError):  # a thread that has just ended
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
    return bool(states) and all(state in "Tt" for state in states)


def stop_before_its_statement_ends(
    worker: WorkerProcess, table: str, query: str, timeout: float = 30
) -> list[int]:
    """Stop ``worker`` (SIGSTOP) inside the transaction whose statement ``query`` writes
    ``table``, right after that statement; PostgreSQL only.

    A session of the test's own locks ``table`` against writes until one of the
    worker's sessions waits for it in ``query``, the worker is stopped, and the lock
    let go: the statement ends and its session sits idle in the transaction, holding
    its locks, for as long as the worker stays stopped. Unlike sampling (see
    :func:`stop_inside_a_transaction`), this catches a transaction of milliseconds that
    runs twice a second at the first try. Returns those sessions' pids; the caller
    sends SIGCONT.
    """

    def sessions(state: str, waiting: bool) -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state = %s AND query LIKE %s "
                "AND (coalesce(wait_event_type, '') = 'Lock') = %s",
                [state, query + "%", waiting],
            )
            return [pid for (pid,) in cursor.fetchall()]

    with postgres_session() as holder:  # commits, and so lets go, on leaving the block
        holder.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        wait_for(lambda: sessions("active", waiting=True), timeout=timeout)
        worker.signal(signal.SIGSTOP)
        wait_for(lambda: stopped(worker.pid), timeout=timeout)  # before the lock goes
    stuck: list[int] = []

    def idle_inside() -> bool:
        stuck[:] = sessions("idle in transaction", waiting=False)
        return bool(stuck)

    wait_for(idle_inside, timeout=timeout)
    return stuck


def pause_outside_a_transaction(worker) -> None:
    """SIGSTOP a worker, but never while it holds locks others would wait for."""
    for _ in range(50):
        worker.signal(signal.SIGSTOP)
        time.sleep(0.02)
        if not holds_a_transaction():
            return
        worker.signal(signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError("the worker was always inside a transaction")


def stop_inside_a_transaction(
    worker: WorkerProcess, query: str = "", timeout: float = 100
) -> list[int]:
    """Stop ``worker`` (SIGSTOP) at a moment it is inside a transaction; PostgreSQL only.

    Its transactions last milliseconds, so this stops and resumes it until one of
    its sessions shows idle in a transaction (whose last statement starts with
    ``query``, if given), and leaves it stopped; returns those sessions' pids.
    The caller sends SIGCONT.
    """
    deadline = time.monotonic() + timeout
    while True:
        worker.signal(signal.SIGSTOP)
        time.sleep(0.01)
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state LIKE 'idle in transaction%%' "
                "AND query LIKE %s",
                [query + "%"],
            )
            pids = [pid for (pid,) in cursor.fetchall()]
        if pids:
            return pids
        worker.signal(signal.SIGCONT)
        assert time.monotonic() < deadline, "never caught the worker inside a transaction"
        time.sleep(random.random() * 0.02)
