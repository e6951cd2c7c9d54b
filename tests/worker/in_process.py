"""Run a real Worker inside the test process, in a thread of its own.

Used where a test must observe what happens inside the worker (Django's task
signals, settings overridden with ``override_settings``) or call its
maintenance duties; everything else starts ``later_worker`` subprocesses.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.db import connections

from later_django.worker.config import WorkerConfig
from later_django.worker.runner import Worker


def _run(worker: Worker, errors: list[BaseException]) -> None:
    try:
        worker.run()
    except BaseException as e:  # noqa: BLE001  (re-raised in the test's thread)
        errors.append(e)
    finally:
        connections.close_all()  # this thread's connections only


@contextmanager
def worker_thread(worker: Worker | None = None, **config: Any) -> Iterator[Worker]:
    """Run a Worker (``worker``, or a new one) until the block ends, then stop it as a
    first SIGTERM would."""
    if worker is None:
        worker = Worker(WorkerConfig(install_signal_handlers=False, **config))
    errors: list[BaseException] = []
    thread = threading.Thread(target=_run, args=(worker, errors), name="test-worker")
    thread.start()
    try:
        yield worker
    finally:
        worker.request_stop()
        thread.join(timeout=60)
    assert not thread.is_alive(), "the worker did not stop"
    if errors:
        raise errors[0]


def burst_worker(**config: Any) -> Worker:
    return Worker(WorkerConfig(install_signal_handlers=False, burst=True, **config))


def run_burst_in_process(worker: Worker | None = None, **config: Any) -> Worker:
    """Run a burst Worker to completion in a thread (so it has its own connection)."""
    if worker is None:
        worker = burst_worker(**config)
    errors: list[BaseException] = []
    thread = threading.Thread(target=_run, args=(worker, errors), name="test-burst-worker")
    thread.start()
    thread.join(timeout=60)
    assert not thread.is_alive(), "the burst worker did not finish"
    if errors:
        raise errors[0]
    return worker
