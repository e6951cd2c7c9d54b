"""The ``later_schedule`` rows: upsert by identifier, removal, listing.

An upsert is one ``INSERT … ON CONFLICT (namespace, identifier) DO UPDATE``,
so two processes declaring one schedule at once (workers starting together)
never create two rows. A schedule whose cron string and time zone are unchanged
keeps its next run time: re-declaring it at every deploy neither skips nor
repeats an occurrence. An upsert never changes ``paused``: a paused schedule
stays paused when it is declared again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgpack
from django.utils import timezone

from ..db import connection_for, from_db, to_db, write_transaction
from ..exceptions import PayloadDecodeError
from .cron import next_run, project_zone
from .definitions import Definition

logger = logging.getLogger(__name__)

COLUMNS = (
    "identifier, cron, time_zone, task_path, payload, sequential, origin, next_run_at, "
    "last_run_at, last_job_id, paused"
)

UPSERT = f"""
INSERT INTO later_schedule (namespace, identifier, cron, time_zone, task_path, payload,
                            sequential, origin, next_run_at, revision, created_at, updated_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, 1, %s, %s)
ON CONFLICT (namespace, identifier) DO UPDATE SET
    next_run_at = CASE
        WHEN later_schedule.cron = excluded.cron AND later_schedule.time_zone = excluded.time_zone
        THEN later_schedule.next_run_at ELSE excluded.next_run_at END,
    cron = excluded.cron,
    time_zone = excluded.time_zone,
    task_path = excluded.task_path,
    payload = excluded.payload,
    sequential = excluded.sequential,
    origin = excluded.origin,
    revision = later_schedule.revision + 1,
    updated_at = excluded.updated_at
RETURNING {COLUMNS}
"""


@dataclass(frozen=True)
class ScheduleInfo:
    """A stored schedule and when it next runs (naive local time when USE_TZ is off)."""

    identifier: str
    cron: str
    time_zone: str
    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    queue_name: str
    priority: int
    sequential: bool
    origin: str
    next_run_at: datetime
    last_run_at: datetime | None
    last_job_id: str | None
    # Why the stored call cannot be read; its args, kwargs, queue and priority are then blank.
    error: str | None = None
    paused: bool = False  # by pause_schedule(); a paused schedule does not fire


PAYLOAD_KEYS = {"args": list, "kwargs": dict, "queue_name": str, "priority": int}


def decode_payload(identifier: str, payload: Any) -> dict[str, Any]:
    """The stored call of a schedule; raise PayloadDecodeError naming the schedule if bad."""
    try:
        data = msgpack.unpackb(bytes(payload), raw=False)
        if not isinstance(data, dict):
            raise TypeError(f"expected a map, got {type(data).__name__}")
        for key, kind in PAYLOAD_KEYS.items():
            if not isinstance(data.get(key), kind):
                raise TypeError(f"{key!r} is {data.get(key)!r}, not a {kind.__name__}")
    except Exception as e:
        # msgpack raises some errors (FormatError) with no message at all.
        cause = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise PayloadDecodeError(
            f"Stored call of schedule {identifier!r} cannot be decoded ({cause}); it must be a "
            "msgpack map of args, kwargs, queue_name and priority. Schedule it again to "
            "replace it, or unschedule it."
        ) from e
    return data


def info(row: tuple, *, broken: bool = False) -> ScheduleInfo:
    """A schedule from its row; with ``broken`` an unreadable call is marked, not raised."""
    identifier, cron, zone, task_path, payload, sequential, origin, next_at, last_at, last_id = row[
        :10
    ]
    error = None
    try:
        data = decode_payload(identifier, payload)
    except PayloadDecodeError as e:
        if not broken:
            raise
        data, error = {"args": [], "kwargs": {}, "queue_name": "", "priority": 0}, str(e)
    next_run_at = from_db(next_at)
    assert next_run_at is not None
    return ScheduleInfo(
        identifier=identifier,
        cron=cron,
        time_zone=zone,
        task_path=task_path,
        args=data["args"],
        kwargs=data["kwargs"],
        queue_name=data["queue_name"],
        priority=data["priority"],
        sequential=bool(sequential),
        origin=origin,
        next_run_at=next_run_at,
        last_run_at=from_db(last_at),
        last_job_id=last_id,
        error=error,
        paused=bool(row[10]),
    )


def upsert(cursor: Any, namespace: str, definition: Definition) -> ScheduleInfo:
    """Create or replace one schedule in the caller's transaction."""
    connection = cursor.db
    now = timezone.now()
    zone = project_zone()
    cursor.execute(
        UPSERT,
        [
            namespace,
            definition.identifier,
            definition.cron,
            str(zone),
            definition.task_path,
            definition.payload(),
            definition.sequential,
            definition.origin,
            to_db(connection, next_run(definition.cron, now, zone)),
            to_db(connection, now),
            to_db(connection, now),
        ],
    )
    return info(cursor.fetchone())


def save(namespace: str, definition: Definition, *, using: str) -> ScheduleInfo:
    with write_transaction(using) as cursor:
        return upsert(cursor, namespace, definition)


def replace_declared(namespace: str, definitions: list[Definition], *, using: str) -> list[str]:
    """Upsert the declared schedules and drop settings-made ones no longer declared.

    Returns the identifiers removed. Schedules made by ``schedule()`` in code
    are left alone unless a declaration takes over their identifier.
    """
    with write_transaction(using) as cursor:
        for definition in definitions:
            upsert(cursor, namespace, definition)
        keep = [d.identifier for d in definitions]
        cursor.execute(
            "DELETE FROM later_schedule WHERE namespace = %s AND origin = 'settings' "
            + (f"AND identifier NOT IN ({', '.join(['%s'] * len(keep))}) " if keep else "")
            + "RETURNING identifier",
            [namespace, *keep],
        )
        return sorted(row[0] for row in cursor.fetchall())


def remove(namespace: str, identifier: str, *, using: str) -> bool:
    with write_transaction(using) as cursor:
        cursor.execute(
            "DELETE FROM later_schedule WHERE namespace = %s AND identifier = %s",
            [namespace, identifier],
        )
        return cursor.rowcount > 0


def read_all(namespace: str, *, using: str, limit: int | None = None) -> list[ScheduleInfo]:
    """The namespace's schedules by identifier; the first ``limit`` of them if given.

    Each schedule whose stored call cannot be decoded is included with
    ``error`` set (and logged), so one bad row never hides the others.
    """
    with connection_for(using).cursor() as cursor:
        cursor.execute(
            f"SELECT {COLUMNS} FROM later_schedule WHERE namespace = %s ORDER BY identifier"
            + (" LIMIT %s" if limit is not None else ""),
            [namespace] if limit is None else [namespace, limit],
        )
        found = [info(row, broken=True) for row in cursor.fetchall()]
    for schedule in found:
        if schedule.error is not None:
            logger.error(
                "schedule identifier=%s unreadable: %s", schedule.identifier, schedule.error
            )
    return found


def read_one(namespace: str, identifier: str, *, using: str) -> ScheduleInfo | None:
    """The schedule ``identifier``, or None; an unreadable call is marked, not raised."""
    with connection_for(using).cursor() as cursor:
        cursor.execute(
            f"SELECT {COLUMNS} FROM later_schedule WHERE namespace = %s AND identifier = %s",
            [namespace, identifier],
        )
        row = cursor.fetchone()
    return info(row, broken=True) if row is not None else None
