"""Recording what happened to claimed jobs, many at a time, fenced by lease.

One transaction per batch: first the execution leases this worker still holds
are deleted (owner and epoch must match, so a worker whose lease was taken over
writes nothing for that job), then the records, index rows and queue commands
of the jobs it still held are updated together.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.utils import timezone

from ..db import connection_for, placeholders, to_db, write_transaction
from ..records import JobRecord, job_key, to_micros

logger = logging.getLogger(__name__)

SUCCESS, FAILED, RETRY, RELEASE = "success", "failed", "retry", "release"


@dataclass
class Outcome:
    job_id: str
    epoch: int
    kind: str  # SUCCESS, FAILED, RETRY or RELEASE
    record: JobRecord | None
    finished_at: datetime
    retry_at: datetime | None = None
    transitions: list[str] = field(default_factory=list)


def record_outcomes(
    namespace: str,
    owner: str,
    outcomes: list[Outcome],
    *,
    retention_seconds: float,
    using: str,
) -> list[Outcome]:
    """Store outcomes; return the ones actually written (the rest were fenced out)."""
    if not outcomes:
        return []
    connection = connection_for(using)
    now = timezone.now()
    expire_at = now + timedelta(seconds=retention_seconds)
    with write_transaction(using) as cursor:
        tokens = [f"{o.job_id}:{o.epoch}" for o in outcomes]
        cursor.execute(
            "DELETE FROM later_job_execution WHERE namespace = %s AND owner = %s "
            f"AND job_id || ':' || epoch IN ({placeholders(len(tokens))}) RETURNING job_id",
            [namespace, owner, *tokens],
        )
        held = {row[0] for row in cursor.fetchall()}
        written = [o for o in outcomes if o.job_id in held]
        for o in outcomes:
            if o.job_id not in held:
                logger.warning(
                    "fenced: lease of job id=%s epoch=%s was taken over; outcome %s not stored",
                    o.job_id,
                    o.epoch,
                    o.kind,
                )
        if not written:
            return []
        record_rows = []
        index_rows = []
        delete_queue = []
        reset_queue = []
        for o in written:
            terminal = o.kind in (SUCCESS, FAILED)
            if o.kind == RETRY and o.retry_at is not None and o.retry_at > now:
                stage, run_at = "requeued", o.retry_at
                delete_queue.append(o.job_id)
            elif o.kind in (RETRY, RELEASE):
                stage, run_at = "enqueued", now
                reset_queue.append(o.job_id)
            else:
                stage, run_at = ("success" if o.kind == SUCCESS else "failed"), None
                delete_queue.append(o.job_id)
            o.transitions.append(stage)
            if o.record is not None:
                o.record.stage = stage
                if terminal:
                    o.record.finished_at = to_micros(o.finished_at)
                record_rows.append(
                    (
                        o.record.encode(),
                        to_db(connection, expire_at) if terminal else None,
                        namespace,
                        job_key(o.job_id),
                    )
                )
            index_rows.append(
                (
                    stage,
                    to_db(connection, o.finished_at) if terminal else None,
                    to_db(connection, now),
                    to_db(connection, run_at),
                    to_db(connection, expire_at) if terminal else None,
                    -1 if o.kind == RELEASE else 0,
                    namespace,
                    o.job_id,
                )
            )
        if record_rows:
            cursor.executemany(
                "UPDATE later_storage SET value = %s, date_expire = %s "
                "WHERE namespace = %s AND key = %s",
                record_rows,
            )
        cursor.executemany(
            "UPDATE later_jobs_index SET stage = %s, finished_at = %s, transitioned_at = %s, "
            "run_at = %s, date_expire = %s, attempts = attempts + %s, revision = revision + 1 "
            "WHERE namespace = %s AND job_id = %s",
            index_rows,
        )
        if delete_queue:
            cursor.execute(
                "DELETE FROM later_delivery_queue WHERE namespace = %s "
                f"AND job_id IN ({placeholders(len(delete_queue))})",
                [namespace, *delete_queue],
            )
        if reset_queue:
            cursor.execute(
                "UPDATE later_delivery_queue SET lease_owner = NULL, available_at = %s "
                f"WHERE namespace = %s AND job_id IN ({placeholders(len(reset_queue))})",
                [to_db(connection, now), namespace, *reset_queue],
            )
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_notify('later_delivery', %s)", [namespace])
    return written
