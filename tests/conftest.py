"""Fixtures shared by the whole suite: the database vendor and real worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parent.parent


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
