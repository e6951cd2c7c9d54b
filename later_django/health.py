"""Health checks of one Later backend alias, for ``manage.py later_health`` and probes.

The checks run in order and stop at the first that leaves nothing to look at:

* ``database``: the alias's database answers a query;
* ``migrations``: every ``later`` migration is applied (as a worker requires);
* ``workers``: at least ``min_workers`` workers wrote a heartbeat within
  ``heartbeat_within`` seconds;
* ``queue`` (only with ``max_ready_age``): the job longest ready to run has
  waited at most that many seconds.

Every read is bounded: one heartbeat-index range and one index entry of the
jobs-by-stage index, whatever the queue length.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db import DatabaseError, connections
from django.utils import timezone

from .backend import LaterBackend
from .counts import oldest_in_stage
from .exceptions import LaterError
from .models import Worker
from .states import Stage
from .worker.config import check_schema


@dataclass(frozen=True)
class Check:
    """One check's verdict, a sentence for people and its figures for machines."""

    name: str
    ok: bool
    message: str
    figures: dict[str, Any] = field(default_factory=dict)

    def line(self) -> str:
        return f"{'ok' if self.ok else 'FAIL'} {self.name}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ok": self.ok, "message": self.message, **self.figures}


@dataclass(frozen=True)
class Health:
    backend: str
    namespace: str
    database: str
    checks: list[Check]

    @property
    def healthy(self) -> bool:
        return all(check.ok for check in self.checks)

    def as_dict(self) -> dict[str, Any]:
        return {
            "healthy": self.healthy,
            "backend": self.backend,
            "namespace": self.namespace,
            "database": self.database,
            "checks": [check.as_dict() for check in self.checks],
        }


def check_health(
    backend: LaterBackend,
    *,
    min_workers: int = 1,
    heartbeat_within: float,
    max_ready_age: float | None = None,
) -> Health:
    """Run the checks against ``backend``'s database; see the module docstring."""
    using, namespace = backend.database, backend.namespace
    checks = [_database(using)]
    if checks[-1].ok:
        checks.append(_migrations(using))
    if checks[-1].ok:
        now = timezone.now()
        checks.append(_workers(namespace, using, now, min_workers, heartbeat_within))
        if max_ready_age is not None:
            checks.append(_queue(namespace, using, now, max_ready_age))
    return Health(backend.alias, namespace, using, checks)


def _database(using: str) -> Check:
    began = time.perf_counter()
    try:
        with connections[using].cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError as e:
        # One line: drivers' messages run over several.
        return Check("database", False, f"{using!r} does not answer: {' '.join(str(e).split())}")
    ms = round((time.perf_counter() - began) * 1000, 1)
    return Check("database", True, f"answers in {ms} ms", {"milliseconds": ms})


def _migrations(using: str) -> Check:
    try:
        check_schema(using)
    except (LaterError, DatabaseError) as e:
        return Check("migrations", False, str(e))
    return Check("migrations", True, "every later migration is applied")


def _workers(namespace: str, using: str, now: datetime, minimum: int, within: float) -> Check:
    alive = (
        Worker.objects.using(using)
        .filter(namespace=namespace, heartbeat_at__gt=now - timedelta(seconds=within))
        .count()
    )
    figures = {"alive": alive, "required": minimum, "heartbeat_within_seconds": within}
    message = f"{alive} of {minimum} required sent a heartbeat within {within:g} s"
    return Check("workers", alive >= minimum, message, figures)


def _queue(namespace: str, using: str, now: datetime, limit: float) -> Check:
    since = oldest_in_stage(namespace, Stage.ENQUEUED, using=using)
    age = None if since is None else round(max((now - since).total_seconds(), 0.0), 3)
    figures = {"oldest_ready_age_seconds": age, "max_ready_age_seconds": limit}
    if age is None:
        return Check("queue", True, "no job is waiting to run", figures)
    message = f"the oldest ready job has waited {age:g} s (at most {limit:g} s allowed)"
    return Check("queue", age <= limit, message, figures)
