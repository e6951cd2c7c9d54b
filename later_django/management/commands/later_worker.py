"""``manage.py later_worker``: run jobs of one Later backend alias until stopped."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from later_django.exceptions import LaterError
from later_django.worker.runner import DEFAULT_CONCURRENCY, Worker, WorkerConfig


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


class Command(BaseCommand):
    help = "Run background jobs of a later_django task backend."

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
            "--health-file",
            type=_health_file,
            default=None,
            metavar="PATH",
            help="Create this file and update its time at each heartbeat, for liveness probes.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            worker = Worker(
                WorkerConfig(
                    backend=options["backend"],
                    concurrency=options["concurrency"],
                    queues=options["queues"],
                    burst=options["burst"],
                    max_jobs=options["max_jobs"],
                    shutdown_timeout=options["shutdown_timeout"],
                    health_file=options["health_file"],
                )
            )
        except LaterError as e:
            raise CommandError(str(e)) from e
        worker.run()
