"""``manage.py later_worker``: run jobs of one Later backend alias until stopped."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import Counter
from collections.abc import Iterator
from io import TextIOBase
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from later_django.engine.outcomes import CANCELLED, FAILED, RELEASE, RETRY, SUCCESS
from later_django.exceptions import LaterError
from later_django.tasks_api import TASKS_LOGGER
from later_django.worker.config import DEFAULT_CONCURRENCY, WorkerConfig
from later_django.worker.runner import Worker

logger = logging.getLogger(__name__)

# Django's --verbosity, as a level of the later_django logger.
VERBOSITY_LEVELS = {0: logging.ERROR, 1: logging.INFO, 2: logging.DEBUG, 3: logging.DEBUG}
CONSOLE_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
# How long a code change waits, beyond --shutdown-timeout, for the worker to stop.
RELOAD_GRACE = 10.0


def _positive_int(value: str) -> int:
    import argparse

    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number >= 1")
    return number


def _seconds(value: str) -> float:
    import argparse
    import math

    try:
        number = float(value)
    except ValueError:
        number = -1
    # float() accepts "nan" and "inf": a drain that never times out is not a number of seconds.
    if not math.isfinite(number) or number < 0:
        raise argparse.ArgumentTypeError(f"{value!r} is not a finite number of seconds >= 0")
    return number


def _health_file(value: str) -> str:
    import argparse
    from pathlib import Path

    path = Path(value)
    if path.is_dir() or not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"{value!r} is not a file path in an existing directory")
    return value


@contextlib.contextmanager
def console_logging(stream: TextIOBase, verbosity: int | None) -> Iterator[None]:
    """Show the ``later_django`` log on ``stream`` unless the project's LOGGING shows it.

    ``verbosity`` is None when --verbosity was not given: the project's own
    level then stands. The logger is restored on exit.
    """
    package = logging.getLogger("later_django")
    saved_level = package.level
    handler = None
    if not package.hasHandlers():
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter(CONSOLE_FORMAT))
        package.addHandler(handler)
        package.setLevel(VERBOSITY_LEVELS[1 if verbosity is None else verbosity])
    elif verbosity is not None:
        package.setLevel(VERBOSITY_LEVELS[verbosity])
    try:
        yield
    finally:
        if handler is not None:
            package.removeHandler(handler)
        package.setLevel(saved_level)


def shown(log: logging.Logger, level: int) -> bool:
    """Whether anything could see a record of ``level`` logged on ``log``.

    True when the level is enabled and a handler on the record's way up would
    take it, and also whenever the answer could be more than this check sees:
    the project set the logger's level or gave it filters, or something hooks
    every record (a custom logger or record class, an error tracker wrapping
    ``Logger.callHandlers`` for its breadcrumbs).
    """
    if (
        log.level != logging.NOTSET
        or log.filters
        or logging.getLoggerClass() is not logging.Logger
        or logging.getLogRecordFactory() is not logging.LogRecord
        or getattr(logging.Logger.callHandlers, "__module__", None) != "logging"
        or getattr(logging.Logger.handle, "__module__", None) != "logging"
    ):
        return True
    if not log.isEnabledFor(level):
        return False
    record = log.makeRecord(log.name, level, __file__, 0, "probe", (), None)
    found = 0
    current: logging.Logger | None = log
    while current is not None:
        for handler in current.handlers:
            found += 1
            if level >= handler.level and handler.filter(record):
                return True
        current = current.parent if current.propagate else None
    last_resort = logging.lastResort
    return found == 0 and last_resort is not None and level >= last_resort.level


@contextlib.contextmanager
def unseen_task_lines_skipped() -> Iterator[None]:
    """Raise Django's task logger to WARNING while the worker runs, when nothing would
    see its DEBUG and INFO lines; restore it on exit.

    Django logs every task's start and finish at INFO, and its default LOGGING
    builds each record only for a handler to drop it unless DEBUG is on: about
    a fifth of a no-op job's CPU in the worker. Failures (ERROR) still go
    through, to ``mail_admins`` among others. A project that shows the lines,
    or sets the logger's level itself, is left as it is.
    """
    log = logging.getLogger(TASKS_LOGGER)
    if not log.isEnabledFor(logging.INFO) or shown(log, logging.DEBUG) or shown(log, logging.INFO):
        yield
        return
    log.setLevel(logging.WARNING)
    logger.debug(
        "%s logs nowhere below WARNING in this project; the worker skips building "
        "those records (give that logger a level or a handler to keep them)",
        TASKS_LOGGER,
    )
    try:
        yield
    finally:
        log.setLevel(logging.NOTSET)


def summary(counts: Counter[str], seconds: float) -> str:
    """One line saying how many jobs ran and how they ended."""
    ran = counts[SUCCESS] + counts[FAILED] + counts[RETRY] + counts[CANCELLED]
    endings = [
        f"{counts[SUCCESS]} succeeded",
        f"{counts[FAILED]} failed",
        f"{counts[RETRY]} retried",
    ]
    if counts[CANCELLED]:
        endings.append(f"{counts[CANCELLED]} cancelled")
    if counts[RELEASE]:
        endings.append(f"{counts[RELEASE]} released")
    if counts["fenced"]:
        endings.append(f"{counts['fenced']} fenced")
    jobs = "job" if ran == 1 else "jobs"
    return f"later_worker: {ran} {jobs} in {seconds:.1f} s ({', '.join(endings)})"


class Command(BaseCommand):
    help = "Run background jobs of a later_django task backend."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # None tells "not given" from 1, so the project's LOGGING level stands unless asked.
        parser.set_defaults(verbosity=None)
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="TASKS alias (default: default).")
        parser.add_argument(
            "--concurrency",
            type=_positive_int,
            default=DEFAULT_CONCURRENCY,
            help=f"Job threads (default: {DEFAULT_CONCURRENCY}).",
        )
        parser.add_argument(
            "--queue",
            action="append",
            dest="queues",
            metavar="NAME",
            help="Only run jobs of this queue; repeat for several (default: every queue).",
        )
        parser.add_argument(
            "--burst", action="store_true", help="Run every job runnable now, then exit."
        )
        parser.add_argument(
            "--max-jobs", type=_positive_int, default=None, help="Exit after claiming N jobs."
        )
        parser.add_argument(
            "--shutdown-timeout",
            type=_seconds,
            default=30.0,
            help="Seconds running jobs get to finish after the first SIGINT/SIGTERM (default 30).",
        )
        parser.add_argument(
            "--reload",
            action="store_true",
            help="Restart the worker when Python code changes. For development only.",
        )

        parser.add_argument(
            "--health-file",
            type=_health_file,
            default=None,
            metavar="PATH",
            help="Create this file and update its time at each heartbeat, for liveness probes.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["reload"] and (options["burst"] or options["max_jobs"] is not None):
            raise CommandError(
                "--reload cannot be combined with --burst or --max-jobs: a worker that exits "
                "on its own has nothing to restart."
            )
        with console_logging(self.stdout, options["verbosity"]), unseen_task_lines_skipped():
            if options["reload"]:
                self.run_reloading(options)
            else:
                self.run_worker(self.build(options, install_signal_handlers=True), options)

    def build(self, options: dict[str, Any], install_signal_handlers: bool) -> Worker:
        try:
            return Worker(
                WorkerConfig(
                    backend=options["backend"],
                    concurrency=options["concurrency"],
                    queues=options["queues"],
                    burst=options["burst"],
                    max_jobs=options["max_jobs"],
                    shutdown_timeout=options["shutdown_timeout"],
                    health_file=options["health_file"],
                    install_signal_handlers=install_signal_handlers,
                )
            )
        except LaterError as e:
            raise CommandError(str(e)) from e

    def run_worker(self, worker: Worker, options: dict[str, Any]) -> None:
        try:
            worker.run()
        finally:
            if options["verbosity"] != 0:
                self.stdout.write(summary(worker.counts, worker.seconds))

    def run_reloading(self, options: dict[str, Any]) -> None:
        """Run the worker under Django's autoreloader, as ``runserver`` runs its server.

        The reloader's process runs the worker in a thread and watches the code
        in its main thread, so the worker installs no signal handlers there. A
        code change stops the worker as a first signal would (running jobs get
        --shutdown-timeout, then are released) before the process restarts.
        """
        from django.utils import autoreload

        current: dict[str, Any] = {}

        def main() -> None:
            try:
                worker = self.build(options, install_signal_handlers=False)
            except CommandError as e:
                # Like runserver with a broken module: wait for the code to be fixed.
                logger.error("cannot start the worker: %s Waiting for a code change.", e)
                return
            current["worker"], current["thread"] = worker, threading.current_thread()
            self.run_worker(worker, options)

        def on_change(sender: Any, file_path: Any, **kwargs: Any) -> None:
            logger.info("%s changed; restarting the worker", file_path)
            worker, thread = current.get("worker"), current.get("thread")
            if worker is not None and thread is not None:
                worker.request_stop()
                thread.join(options["shutdown_timeout"] + RELOAD_GRACE)

        autoreload.file_changed.connect(on_change, weak=False, dispatch_uid="later_worker")
        autoreload.run_with_reloader(main)
