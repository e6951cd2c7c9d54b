"""Pausing, resuming and running a stored schedule now.

Each change locks the schedule's row (``FOR UPDATE`` on PostgreSQL, the write
lock on SQLite) and raises its ``revision``, as firing does, so it never
interleaves with a worker firing the same schedule: a tick either fires before
the change or sees the changed row.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ..db import to_db, write_transaction
from ..exceptions import ScheduleBusy, ScheduleNotFound
from ..sql import dialect
from .cron import next_run
from .store import COLUMNS, ScheduleInfo, info
from .ticking import _enqueue, _unfinished

if TYPE_CHECKING:
    from ..backend import LaterBackend

logger = logging.getLogger(__name__)


def _locked(cursor: Any, namespace: str, identifier: str) -> tuple:
    cursor.execute(
        f"SELECT {COLUMNS} FROM later_schedule WHERE namespace = %s AND identifier = %s"
        + dialect(cursor.db).LOCK,
        [namespace, identifier],
    )
    row = cursor.fetchone()
    if row is None:
        raise ScheduleNotFound(f"No schedule {identifier!r} in namespace {namespace!r}.")
    return row


def _set(cursor: Any, namespace: str, identifier: str, assignments: str, params: list) -> tuple:
    cursor.execute(
        f"UPDATE later_schedule SET {assignments}, revision = revision + 1, updated_at = %s "
        f"WHERE namespace = %s AND identifier = %s RETURNING {COLUMNS}",
        [*params, to_db(cursor.db, timezone.now()), namespace, identifier],
    )
    return cursor.fetchone()


def pause(namespace: str, identifier: str, *, using: str) -> ScheduleInfo:
    """Stop the schedule from firing until it is resumed; a paused one stays as it is."""
    with write_transaction(using) as cursor:
        row = _locked(cursor, namespace, identifier)
        if row[10]:
            return info(row, broken=True)
        row = _set(cursor, namespace, identifier, "paused = %s", [True])
    logger.info("schedule paused namespace=%s identifier=%s", namespace, identifier)
    return info(row, broken=True)


def resume(namespace: str, identifier: str, *, using: str) -> ScheduleInfo:
    """Let a paused schedule fire again, from its first cron time after now.

    The runs it missed while paused are not made up. A schedule that is not
    paused is left as it is, so resuming it twice cannot skip a due run.
    """
    with write_transaction(using) as cursor:
        row = _locked(cursor, namespace, identifier)
        if not row[10]:
            return info(row, broken=True)
        following = next_run(row[1], timezone.now())
        row = _set(
            cursor,
            namespace,
            identifier,
            "paused = %s, next_run_at = %s",
            [False, to_db(cursor.db, following)],
        )
    logger.info(
        "schedule resumed namespace=%s identifier=%s next=%s",
        namespace,
        identifier,
        following.isoformat(),
    )
    return info(row, broken=True)


def run_now(backend: LaterBackend, identifier: str) -> str:
    """Enqueue one occurrence of the schedule now and record it as the last; return its id.

    Its next run time stays as it was, paused or not. Raises ScheduleBusy for
    a sequential schedule whose last occurrence is unfinished, and the
    enqueue's own error (PayloadDecodeError, TaskUnavailable…) when the stored
    call cannot be made.
    """
    namespace, using = backend.namespace, backend.database
    with write_transaction(using) as cursor:
        now = timezone.now()
        row = _locked(cursor, namespace, identifier)
        _, _, _, task_path, payload, sequential, _, _, _, last_job_id, _ = row
        if sequential and _unfinished(cursor, namespace, last_job_id, now):
            raise ScheduleBusy(
                f"Schedule {identifier!r} is sequential and its last occurrence, job "
                f"{last_job_id!r}, has not finished; run it again once that job has ended."
            )
        job_id = _enqueue(cursor, backend, identifier, task_path, payload, sequential, now)
        _set(
            cursor,
            namespace,
            identifier,
            "last_run_at = %s, last_job_id = %s",
            [to_db(cursor.db, now), job_id],
        )
    logger.info("schedule run now namespace=%s identifier=%s job=%s", namespace, identifier, job_id)
    return job_id
