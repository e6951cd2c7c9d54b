"""One real ``later_worker --burst`` run shared by the tests of a module.

Starting a worker process costs about a second, so a module enqueues every job
it needs, runs one worker, and its tests then read what the database holds.
The jobs are committed outside any test (as a module-scoped fixture must), and
the database is flushed again when the module is done with them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from django.core.management import call_command
from django.utils import timezone

from later_django.tasks_api import TaskResult, default_task_backend
from tests.conftest import WorkerProcess, wait_for, worker_env
from tests.models import Execution


@dataclass
class Run:
    """What one worker run left behind: the enqueued results and the signals it sent."""

    enqueued: dict[str, TaskResult]
    exit_code: int | None = None
    output: str = ""
    finished: bool = False
    signals: list[tuple[str, str, str, str]] = field(default_factory=list)

    def result(self, label: str) -> TaskResult:
        """The job's current result, read from the database."""
        return default_task_backend.get_result(self.enqueued[label].id)

    def signals_of(self, label: str) -> list[tuple[str, ...]]:
        """(signal, status, sender[, exception]) in the order the worker sent them."""
        job_id = self.enqueued[label].id
        return [(kind, *rest) for kind, found, *rest in self.signals if found == job_id]


def _terminal(results: dict[str, TaskResult]) -> bool:
    now = timezone.now()
    for result in results.values():
        if result.task.run_after is not None and result.task.run_after > now:
            continue  # not due: the burst worker leaves it
        if not default_task_backend.get_result(result.id).is_finished:
            return False
    return True


@contextmanager
def worker_run(
    blocker,
    log_path: Path,
    enqueue: Callable[[], dict[str, TaskResult]],
    *args: str,
    timeout: float = 60,
) -> Iterator[Run]:
    """Enqueue with ``enqueue()``, run a burst worker until every due job is finished, yield."""
    with blocker.unblock():
        run = Run(enqueued=enqueue())
        worker = WorkerProcess(["--burst", *args], log_path, worker_env())
        try:
            wait_for(lambda: _terminal(run.enqueued), timeout=timeout)
            run.finished = True
            run.exit_code = worker.wait(timeout=timeout)
        except (AssertionError, subprocess.TimeoutExpired):
            pass  # the tests say what went wrong; a hung worker is killed below
        finally:
            worker.stop()
            run.output = worker.log_path.read_text(errors="replace")
        rows = Execution.objects.order_by("id").values_list("kind", "value")
        run.signals = [(kind, *value.split(" ")) for kind, value in rows]
    try:
        yield run
    finally:
        with blocker.unblock():
            call_command("flush", interactive=False, verbosity=0)
