"""Firing due schedules: each worker's maintenance thread calls ``run_due`` every turn.

A due schedule fires in one transaction that locks its row (``FOR UPDATE SKIP
LOCKED`` on PostgreSQL, the write lock on SQLite), enqueues the occurrence and
moves ``next_run_at`` on with ``revision`` unchanged since it was read: however
many workers tick, each occurrence is enqueued exactly once, and a crash either
commits both or neither. ``next_run_at`` moves to the first cron time after
*now*, so after downtime a schedule runs once for the missed period and then
resumes on time.

A sequential schedule fires only when its previous occurrence has finished
(succeeded, failed or been cancelled); until then it stays due, and the one
occurrence it then enqueues covers every tick it waited through.

A paused schedule never fires: the due index leaves it out, so the tick does
not even read it. Resuming moves its next run to the first cron time after the
moment of resuming. Its
occurrences go through the reserved topic ``later.schedules``, keyed by the
schedule identifier, so continuations of an occurrence (which join its
partition) run before the next occurrence.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, transaction
from django.utils import timezone

from ..db import connection_for, from_db, to_db, write_transaction
from ..records import JobRecord, job_key
from ..results import resolve_task
from ..sql import dialect
from ..states import UNFINISHED
from ..tasks_api import TaskResult
from . import SCHEDULES_TOPIC
from .cron import next_run
from .definitions import declared
from .store import decode_payload, replace_declared

if TYPE_CHECKING:
    from ..backend import LaterBackend

logger = logging.getLogger(__name__)

BATCH = 100
# The due index holds unpaused schedules only. SQLite uses a partial index only when
# the query repeats its condition as written, and Django writes Q(paused=False) as
# ``"paused" = 0`` from 6.0 but ``NOT "paused"`` before: the query holds both forms, so
# the index serves it whichever Django ran the migration.
UNPAUSED = "namespace = %s AND paused = %s AND NOT paused"


def sync_declared(backend: LaterBackend) -> None:
    """Store the schedules declared in the backend's OPTIONS; raise InvalidArgument if bad."""
    definitions = declared(backend.later)
    removed = replace_declared(backend.namespace, definitions, using=backend.database)
    if definitions or removed:
        logger.info(
            "declared schedules synced namespace=%s schedules=%s removed=%s",
            backend.namespace,
            ",".join(d.identifier for d in definitions) or "-",
            ",".join(removed) or "-",
        )


def run_due(backend: LaterBackend) -> list[str]:
    """Enqueue the occurrences of every due schedule; return the new jobs' ids."""
    namespace, using = backend.namespace, backend.database
    connection = connection_for(using)
    with connection.cursor() as cursor:
        # A plain read first, so that idle ticks never take SQLite's write lock.
        cursor.execute(
            f"SELECT 1 FROM later_schedule WHERE {UNPAUSED} AND next_run_at <= %s LIMIT 1",
            [namespace, False, to_db(connection, timezone.now())],
        )
        if cursor.fetchone() is None:
            return []
    fired: list[str] = []
    with write_transaction(using) as cursor:
        now = timezone.now()
        cursor.execute(
            "SELECT identifier, cron, task_path, payload, sequential, next_run_at, last_job_id, "
            f"revision FROM later_schedule WHERE {UNPAUSED} AND next_run_at <= %s "
            "ORDER BY next_run_at LIMIT %s" + dialect(connection).SKIP_LOCKED,
            [namespace, False, to_db(connection, now), BATCH],
        )
        for row in cursor.fetchall():
            job_id = _fire(cursor, backend, row, now)
            if job_id is not None:
                fired.append(job_id)
    return fired


def next_due(backend: LaterBackend) -> datetime | None:
    """When the namespace's next schedule falls due, of those not due yet; None without one.

    Workers wake for that moment, so an occurrence is enqueued at its time and
    not up to a poll interval later, and a per-second schedule misses no tick.
    """
    connection = connection_for(backend.database)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT MIN(next_run_at) FROM later_schedule WHERE {UNPAUSED} AND next_run_at > %s",
            [backend.namespace, False, to_db(connection, timezone.now())],
        )
        return from_db(cursor.fetchone()[0])  # MIN gives one row, NULL without a schedule


def _fire(cursor: Any, backend: LaterBackend, row: tuple, now: Any) -> str | None:
    identifier, cron, task_path, payload, sequential, next_at, last_job_id, revision = row
    connection = cursor.db
    due = from_db(next_at)
    if sequential and _unfinished(cursor, backend.namespace, last_job_id, now):
        return None
    job_id = None
    try:
        with transaction.atomic(using=backend.database):
            job_id = _enqueue(cursor, backend, identifier, task_path, payload, sequential, due)
    except DatabaseError:
        raise
    except Exception:
        # The task was removed or changed since it was scheduled: skip this occurrence
        # rather than retry it every turn.
        logger.exception(
            "schedule identifier=%s could not enqueue its occurrence due=%s; skipped",
            identifier,
            due,
        )
    cursor.execute(
        "UPDATE later_schedule SET next_run_at = %s, last_run_at = %s, "
        "last_job_id = COALESCE(%s, last_job_id), revision = revision + 1 "
        "WHERE namespace = %s AND identifier = %s AND revision = %s",
        [
            to_db(connection, next_run(cron, now)),
            to_db(connection, due),
            job_id,
            backend.namespace,
            identifier,
            revision,
        ],
    )
    if cursor.rowcount != 1:
        # Unreachable while the row is locked; refuse to keep an occurrence otherwise.
        raise DatabaseError(f"schedule {identifier!r} changed while it fired")
    if job_id is not None:
        logger.info("schedule fired identifier=%s due=%s job=%s", identifier, due, job_id)
    return job_id


def _unfinished(cursor: Any, namespace: str, job_id: str | None, now: Any) -> bool:
    if job_id is None:
        return False
    cursor.execute(
        "SELECT stage FROM later_jobs_index WHERE namespace = %s AND job_id = %s "
        "AND (date_expire IS NULL OR date_expire > %s)",
        [namespace, job_id, to_db(cursor.db, now)],
    )
    found = cursor.fetchone()
    return found is not None and found[0] in UNFINISHED


def _enqueue(
    cursor: Any,
    backend: LaterBackend,
    identifier: str,
    task_path: str,
    payload: Any,
    sequential: bool,
    due: Any,
) -> str:
    data = decode_payload(identifier, payload)
    task = resolve_task(task_path).using(
        queue_name=data["queue_name"],
        priority=data["priority"],
        run_after=due,
        backend=backend.alias,
    )
    result: TaskResult
    if sequential:
        result = backend.enqueue_partitioned(
            task, data["args"], data["kwargs"], topic=SCHEDULES_TOPIC, key=identifier
        )
    else:
        result = backend.enqueue(task, data["args"], data["kwargs"])
    _mark_occurrence(cursor, backend.namespace, result.id, identifier)
    return result.id


def _mark_occurrence(cursor: Any, namespace: str, job_id: str, identifier: str) -> None:
    """Name the schedule in the new job's record, for the dashboard and for people."""
    key = job_key(job_id)
    cursor.execute(
        "SELECT value FROM later_storage WHERE namespace = %s AND key = %s", [namespace, key]
    )
    record = JobRecord.decode(bytes(cursor.fetchone()[0]), job_id=job_id)
    record.schedule = identifier
    cursor.execute(
        "UPDATE later_storage SET value = %s WHERE namespace = %s AND key = %s",
        [record.encode(), namespace, key],
    )
