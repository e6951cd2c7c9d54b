"""``manage.py later_health``: exit 0 when a Later backend is healthy, 1 when not, 2 on bad use."""

from __future__ import annotations

import json
import math
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from later_django.conf import later_settings
from later_django.exceptions import LaterError
from later_django.health import check_health
from later_django.worker.config import later_backend

UNHEALTHY = 1
MISCONFIGURED = 2


def _number(flag: str, value: str | None, *, whole: bool) -> float | None:
    """Parse a flag's value, or raise CommandError (exit 2) naming it and what is allowed."""
    if value is None:
        return None
    try:
        number = int(value) if whole else float(value)
    except ValueError:
        number = -1
    if not math.isfinite(number) or number < 0:
        kind = "a whole number >= 0" if whole else "a finite number of seconds >= 0"
        raise CommandError(f"{flag} is {value!r}; it must be {kind}.", returncode=MISCONFIGURED)
    return number


class Command(BaseCommand):
    help = (
        "Check a later_django backend: the database answers, its migrations are applied, "
        "enough workers send heartbeats, and (optionally) no ready job waits too long. "
        "Exits 0 when healthy, 1 when not, 2 when misconfigured."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--backend", default="default", help="TASKS alias (default: default).")
        parser.add_argument(
            "--min-workers",
            default="1",
            metavar="N",
            help="Workers that must have a recent heartbeat (default 1; 0 skips the need).",
        )
        parser.add_argument(
            "--heartbeat-within",
            default=None,
            metavar="SECONDS",
            help="How recent a heartbeat must be (default: LATER_WORKER_DEAD_AFTER).",
        )
        parser.add_argument(
            "--max-ready-age",
            default=None,
            metavar="SECONDS",
            help="Fail when the oldest job ready to run has waited longer (default: no limit).",
        )
        parser.add_argument(
            "--json", action="store_true", help="Print one JSON object instead of lines."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        min_workers = _number("--min-workers", str(options["min_workers"]), whole=True)
        within = _number("--heartbeat-within", _text(options["heartbeat_within"]), whole=False)
        max_age = _number("--max-ready-age", _text(options["max_ready_age"]), whole=False)
        try:
            backend = later_backend(options["backend"], needed_by="later_health")
        except LaterError as e:
            raise CommandError(str(e), returncode=MISCONFIGURED) from e
        health = check_health(
            backend,
            min_workers=int(min_workers or 0),
            heartbeat_within=later_settings.worker_dead_after if within is None else within,
            max_ready_age=max_age,
        )
        if options["json"]:
            self.stdout.write(json.dumps(health.as_dict()))
        else:
            for check in health.checks:
                self.stdout.write(check.line())
        if not health.healthy:
            failed = [check.name for check in health.checks if not check.ok]
            raise CommandError(
                f"Backend {health.backend!r} is unhealthy: {', '.join(failed)} failed.",
                returncode=UNHEALTHY,
            )


def _text(value: object) -> str | None:
    return None if value is None else str(value)
