"""later_worker as a Django command: --verbosity and logging, the summary line, --reload."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from later_django.tasks_api import TASKS_LOGGER
from tests import tasks
from tests.conftest import ROOT, wait_for, worker_env
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

NO_LOGGING = 'LOGGING = {"version": 1, "disable_existing_loggers": False}\n'


def settings_env(tmp_path: Path, body: str, name: str = "worker_settings") -> dict[str, str]:
    """Environment for a worker whose settings are the suite's plus ``body``."""
    (tmp_path / f"{name}.py").write_text(f"from tests.settings import *  # noqa: F403\n{body}")
    return worker_env(
        DJANGO_SETTINGS_MODULE=name, PYTHONPATH=os.pathsep.join([str(ROOT), str(tmp_path)])
    )


def burst(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        [sys.executable, "-m", "django", "later_worker", "--burst", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    return completed


def lines(text: str, pattern: str) -> list[str]:
    return [line for line in text.splitlines() if re.search(pattern, line)]


def test_without_logging_config_the_worker_logs_info_to_stdout_once(tmp_path):
    tasks.record.enqueue("console", "a")
    completed = burst(env=settings_env(tmp_path, NO_LOGGING))
    assert len(lines(completed.stdout, r" INFO later_django\.worker\.runner worker starting ")) == 1
    assert len(lines(completed.stdout, r" INFO later_django\.worker\.runner worker stopped ")) == 1
    assert "job success" not in completed.stdout  # DEBUG
    assert completed.stderr == ""


def test_verbosity_0_shows_errors_only_and_no_summary(tmp_path):
    tasks.record.enqueue("console", "a")
    failing = tasks.always_fails.enqueue("boom")
    completed = burst("--verbosity", "0", env=settings_env(tmp_path, NO_LOGGING))
    out = completed.stdout
    assert lines(out, rf" ERROR later_django\.worker\.runner job failed id={failing.id}$")
    assert " INFO " not in out
    assert " WARNING " not in out  # the retries
    assert "later_worker:" not in out


def test_verbosity_2_shows_debug_lines(tmp_path):
    result = tasks.record.enqueue("console", "a")
    completed = burst("-v", "2", env=settings_env(tmp_path, NO_LOGGING))
    assert lines(
        completed.stdout, rf" DEBUG later_django\.worker\.runner job success id={result.id}$"
    )


def test_project_logging_level_stands_when_verbosity_is_not_given(tmp_path):
    # The suite's LOGGING sends later_django to stderr at LATER_TEST_LOG_LEVEL.
    tasks.record.enqueue("console", "a")
    quiet = burst(env=worker_env(LATER_TEST_LOG_LEVEL="WARNING"))
    assert "worker starting" not in quiet.stdout + quiet.stderr
    result = tasks.record.enqueue("console", "b")
    chatty = burst(env=worker_env(LATER_TEST_LOG_LEVEL="DEBUG"))
    assert (
        f"job success id={result.id}" in chatty.stderr
    )  # not lowered to INFO by the default verbosity
    # The project's handler shows the log; none is added on stdout.
    assert chatty.stdout.splitlines() == [lines(chatty.stdout, "^later_worker: ")[0]]


def test_explicit_verbosity_sets_the_level_of_a_project_logging_config_without_duplicates(tmp_path):
    results = [tasks.record.enqueue("console", str(i)) for i in range(3)]
    completed = burst("--verbosity", "2", env=worker_env(LATER_TEST_LOG_LEVEL="WARNING"))
    for result in results:
        assert len(lines(completed.stderr, rf"job success id={result.id}$")) == 1
    assert len(lines(completed.stderr, "worker starting")) == 1
    assert completed.stdout.splitlines() == [lines(completed.stdout, "^later_worker: ")[0]]


def task_log_settings(handler_level: str, logger_level: str | None = None) -> str:
    """Settings whose LOGGING sends Django's task log to stdout through a handler at
    ``handler_level``, with the logger's own level ``logger_level`` (or left unset)."""
    out = {"class": "logging.StreamHandler", "stream": "ext://sys.stdout", "level": handler_level}
    tasks_logger: dict[str, object] = {"handlers": ["out"]}
    if logger_level is not None:
        tasks_logger["level"] = logger_level
    config = {
        "version": 1,
        "disable_existing_loggers": False,
        "handlers": {"out": out},
        "loggers": {TASKS_LOGGER: tasks_logger},
    }
    return f"LOGGING = {config!r}\n"


def test_djangos_task_lines_reach_a_project_that_shows_them(tmp_path):
    # The level too: on Django 5.2 the backport's logger is not under "django", whose
    # INFO level Django's own LOGGING sets, so it would inherit the root's WARNING.
    result = tasks.record.enqueue("console", "a")
    completed = burst(env=settings_env(tmp_path, task_log_settings("INFO", "INFO")))
    assert lines(completed.stdout, rf"^Task id={result.id} path=\S+ state=\S*RUNNING$")
    assert lines(completed.stdout, rf"^Task id={result.id} path=\S+ state=\S*SUCCESSFUL$")


def test_where_only_errors_show_a_failure_still_logs_its_traceback(tmp_path):
    # The worker skips building the start and finish lines nothing would show, not these.
    failing = tasks.always_fails.enqueue("boom")
    completed = burst(env=settings_env(tmp_path, task_log_settings("ERROR")))
    assert lines(completed.stdout, rf"^Task id={failing.id} path=\S+ state=\S*FAILED$")
    assert "Traceback (most recent call last)" in completed.stdout


def test_the_worker_prints_one_summary_line_on_exit(tmp_path):
    for i in range(3):
        tasks.record.enqueue("summary", str(i))
    tasks.always_fails.enqueue("boom")  # two retries, then failed
    completed = burst(env=worker_env(LATER_TEST_LOG_LEVEL="WARNING"))
    summary = lines(completed.stdout, "later_worker:")
    assert len(summary) == 1, completed.stdout
    assert re.fullmatch(
        r"later_worker: 6 jobs in \d+\.\d s \(3 succeeded, 1 failed, 2 retried\)", summary[0]
    ), summary


def test_reload_is_refused_with_burst():
    completed = subprocess.run(
        [sys.executable, "-m", "django", "later_worker", "--reload", "--burst"],
        cwd=ROOT,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert completed.returncode == 1
    assert completed.stderr == (
        "CommandError: --reload cannot be combined with --burst or --max-jobs: a worker that "
        "exits on its own has nothing to restart.\n"
    )


def test_reload_restarts_the_worker_when_a_watched_module_changes(tmp_path):
    env = settings_env(tmp_path, NO_LOGGING)
    watched = tmp_path / "worker_settings.py"
    log_path = tmp_path / "reload.log"
    with open(log_path, "wb") as log:
        parent = subprocess.Popen(
            [sys.executable, "-m", "django", "later_worker", "--reload", "--concurrency", "1"],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    children: set[int] = set()

    def starts() -> list[str]:
        found = re.findall(r"worker starting id=[^:]+:(\d+):", log_path.read_text(errors="replace"))
        children.update(int(pid) for pid in found)
        return found

    try:
        wait_for(lambda: len(starts()) == 1, timeout=60)
        tasks.record.enqueue("reload", "before")
        wait_for(lambda: Execution.objects.filter(kind="reload").exists(), timeout=30)
        bump = iter(range(1, 10_000))

        def restarted() -> bool:
            """The worker started again after its settings module changed."""
            # Until the reloader has taken its first look at the files, a change goes
            # unseen; each touch moves the time on, so a later one is seen.
            stamp = time.time() + next(bump)
            os.utime(watched, (stamp, stamp))
            return len(starts()) >= 2

        wait_for(restarted, timeout=60, step=0.5)
        output = log_path.read_text(errors="replace")
        assert f"{watched} changed; restarting the worker" in output
        # The first worker stopped as for a first signal and said how it went.
        assert re.search(r"worker stopped id=\S+ claimed=1 succeeded=1 ", output), output
        assert lines(output, r"^later_worker: 1 job in ")
        first, second = starts()[:2]
        assert first != second  # a new process
        assert parent.poll() is None
    finally:
        parent.send_signal(signal.SIGTERM)
        parent.wait(timeout=30)
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
