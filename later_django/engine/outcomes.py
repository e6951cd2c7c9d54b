"""Recording what happened to claimed jobs, many at a time, fenced by lease.

One transaction per batch: first the execution leases this worker still holds
are deleted (owner and epoch must match, so a worker whose lease was taken over
writes nothing for that job), then the records, index rows and queue commands
of the jobs it still held are updated together. On PostgreSQL all of that is
one statement over arrays.

A job whose cancel was requested while it ran (``cancel_requested_at`` on its
index row, which the statements lock first) is held back from that statement
and stored in a transaction that first gives its outcome what the cancel asks
(``honouring.honour``).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from ..db import (
    connection_for,
    hot_cursor,
    is_postgres,
    placeholders,
    retrying,
    to_db,
    write_transaction,
)
from ..records import job_key
from ..states import FINISHED, Stage, sql_list
from ..topics import completion as partitions
from . import continuations
from .attempt import CANCELLED, FAILED, RELEASE, RETRY, SUCCESS, Outcome, plan, planned
from .honouring import flagged_jobs, honour_plans

# The logger keeps the name it had before the module moved, which operators filter on.
logger = logging.getLogger("later_django.worker.outcomes")

# The outcome value and its kinds live in attempt.py; they are imported from here too.
__all__ = [
    "CANCELLED",
    "FAILED",
    "RELEASE",
    "RETRY",
    "SUCCESS",
    "Outcome",
    "plan",
    "planned",
    "record_outcomes",
]

# Arrays travel in binary (%b), which psycopg adapts without escaping each element.
_GIVEN = """unnest(
        %(job_ids)b::text[], %(epochs)b::bigint[], %(stages)b::text[], %(values)b::bytea[],
        %(finished)b::timestamptz[], %(run_at)b::timestamptz[], %(expire)b::timestamptz[],
        %(attempts)b::int[]
    ) AS t(job_id, epoch, stage, value, finished_at, run_at, date_expire, attempts_delta)"""

# Stores the outcomes in ``v``; returns (job id, deferred, ...) for each one it held.
_STORE = f"""fenced AS (
    DELETE FROM later_job_execution AS e USING v
    WHERE e.namespace = %(ns)s AND e.owner = %(owner)s AND e.job_id = v.job_id
      AND e.epoch = v.epoch
    RETURNING e.job_id
), held AS (
    SELECT v.* FROM v JOIN fenced USING (job_id)
), stored AS (
    UPDATE later_storage AS s SET value = COALESCE(held.value, s.value),
        date_expire = held.date_expire
    FROM held
    WHERE s.namespace = %(ns)s AND s.key = 'job:' || held.job_id
), indexed AS (
    UPDATE later_jobs_index AS i SET stage = held.stage, finished_at = held.finished_at,
        transitioned_at = %(now)s, run_at = held.run_at, date_expire = held.date_expire,
        attempts = i.attempts + held.attempts_delta, revision = i.revision + 1
    FROM held
    WHERE i.namespace = %(ns)s AND i.job_id = held.job_id
), dequeued AS (
    DELETE FROM later_delivery_queue AS d USING held
    WHERE d.namespace = %(ns)s AND d.job_id = held.job_id AND held.stage <> '{Stage.ENQUEUED}'
), requeued AS (
    UPDATE later_delivery_queue AS d SET lease_owner = NULL, available_at = %(now)s
    FROM held
    WHERE d.namespace = %(ns)s AND d.job_id = held.job_id AND held.stage = '{Stage.ENQUEUED}'
    RETURNING d.job_id
), woken AS (
    SELECT pg_notify('later_delivery', %(ns)s) FROM (SELECT 1 FROM requeued LIMIT 1) AS any_requeued
)
SELECT job_id, FALSE, (SELECT COUNT(*) FROM woken) FROM fenced"""

# In the transaction that also settles partition heads and children. The index rows
# are locked first, which reads a cancel request committed by a cancel that held a row;
# unless ``honoured``, a job with one is left out ("deferred") for honouring.honour.
PG_OUTCOMES = f"""
WITH given AS (
    SELECT * FROM {_GIVEN}
), locked AS MATERIALIZED (
    SELECT job_id, cancel_requested_at IS NOT NULL AS flagged FROM later_jobs_index
    WHERE namespace = %(ns)s AND job_id = ANY(%(job_ids)b::text[])
    ORDER BY job_id FOR NO KEY UPDATE
), deferred AS (
    SELECT job_id FROM locked WHERE flagged AND NOT %(honoured)s
), v AS (
    SELECT * FROM given WHERE job_id NOT IN (SELECT job_id FROM deferred)
), {_STORE}
UNION ALL SELECT job_id, TRUE, 0 FROM deferred
"""

# On its own, in autocommit: every job's index row is locked first (in id order,
# as a continuation's enqueue locks parents), which reads ``has_children`` and a
# cancel request as committed by any enqueue or cancel that held the row. A
# finished job with children, and any job with a cancel request, is left alone
# ("deferred") for the transaction that settles children and honours cancels.
PG_OUTCOMES_ALONE = f"""
WITH locked AS MATERIALIZED (
    SELECT job_id, has_children, cancel_requested_at IS NOT NULL AS flagged
    FROM later_jobs_index
    WHERE namespace = %(ns)s AND job_id = ANY(%(job_ids)b::text[])
    ORDER BY job_id FOR NO KEY UPDATE
), given AS (
    SELECT * FROM {_GIVEN}
), deferred AS (
    SELECT l.job_id FROM locked AS l JOIN given AS g USING (job_id)
    WHERE (l.has_children AND g.stage IN ({sql_list(FINISHED)})) OR l.flagged
), v AS (
    SELECT * FROM given WHERE job_id NOT IN (SELECT job_id FROM deferred)
), {_STORE}
UNION ALL SELECT job_id, TRUE, 0 FROM deferred
"""


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
    plans = [planned(o, now) for o in outcomes]
    if is_postgres(connection) and not connection.in_atomic_block and _plain(outcomes):
        with hot_cursor(using) as cursor:
            cursor.execute(PG_OUTCOMES_ALONE, _pg_params(namespace, owner, plans, now, expire_at))
            rows = cursor.fetchall()
        held = {job_id for job_id, is_deferred, _ in rows if not is_deferred}
        deferred = {job_id for job_id, is_deferred, _ in rows if is_deferred}
        if deferred:
            # Retried here: a retry of the whole call would find these others fenced out.
            rest = [p for p in plans if p[0].job_id in deferred]
            held |= retrying(
                lambda: _record_with_settling(
                    connection, namespace, owner, rest, now, expire_at, using
                ),
                what="record outcomes of jobs with continuations",
                using=using,
            )
    else:
        held = _record_with_settling(connection, namespace, owner, plans, now, expire_at, using)
    written = []
    for o in outcomes:
        if o.job_id in held:
            o.transitions.append(plan(o, now)[0])  # a cancel may have changed its kind
            written.append(o)
        else:
            logger.warning(
                "fenced: lease of job id=%s epoch=%s was taken over; outcome %s not stored",
                o.job_id,
                o.epoch,
                o.kind,
            )
    return written


def _plain(outcomes: list[Outcome]) -> bool:
    """Whether no outcome can touch a partition head: no topic job, no unreadable record."""
    return all(o.record is not None and o.record.topic is None for o in outcomes)


def _pg_params(namespace, owner, plans, now, expire_at, honoured=False) -> dict[str, object]:
    return {
        "ns": namespace,
        "owner": owner,
        "now": now,
        "job_ids": [o.job_id for o, *_ in plans],
        "epochs": [o.epoch for o, *_ in plans],
        "stages": [stage for _, stage, _, _ in plans],
        "values": [o.record.encode() if o.record else None for o, *_ in plans],
        "finished": [o.finished_at if t else None for o, _, _, t in plans],
        "run_at": [run_at for _, _, run_at, _ in plans],
        "expire": [expire_at if t else None for *_, t in plans],
        "attempts": [o.attempts_delta for o, *_ in plans],
        "honoured": honoured,
    }


def _record_with_settling(connection, namespace, owner, plans, now, expire_at, using) -> set[str]:
    """Store outcomes, advance partition heads and settle children, in one transaction."""
    outcomes = [o for o, *_ in plans]
    with write_transaction(using, hot=True) as cursor:
        # Before the execution leases; plain jobs have no heads and skip the topics code.
        heads = {} if _plain(outcomes) else partitions.lock_heads(cursor, namespace, outcomes)
        if is_postgres(connection):
            cursor.execute(PG_OUTCOMES, _pg_params(namespace, owner, plans, now, expire_at))
            rows = cursor.fetchall()
            held = {job_id for job_id, deferred, _ in rows if not deferred}
            flagged = {job_id for job_id, deferred, _ in rows if deferred}
            if flagged:
                held |= _honour_postgres(cursor, namespace, owner, plans, flagged, now, expire_at)
        else:
            held = _record_sqlite(cursor, connection, namespace, owner, plans, now, expire_at)
        # A finished head advances its partition in the transaction that stores its state.
        settled = [p for p in plans if p[0].job_id in held]
        if heads:
            partitions.settle(cursor, namespace, owner, settled, heads, now)
        # Children are released or cancelled in the same transaction as their parents end.
        continuations.settle(
            cursor,
            namespace,
            succeeded=[o.job_id for o, stage, _, _ in settled if stage == Stage.SUCCESS],
            failed=[o.job_id for o, stage, _, _ in settled if stage == Stage.FAILED],
            cancelled=[o.job_id for o, stage, _, _ in settled if stage == Stage.CANCELLED],
            now=now,
            expire_at=expire_at,
        )
    return held


def _honour_postgres(cursor, namespace, owner, plans, flagged, now, expire_at) -> set[str]:
    """Store the outcomes of jobs with a cancel request, their index rows still locked."""
    again = honour_plans(cursor, namespace, plans, flagged, now)
    cursor.execute(PG_OUTCOMES, _pg_params(namespace, owner, again, now, expire_at, True))
    return {job_id for job_id, deferred, _ in cursor.fetchall() if not deferred}


def _record_sqlite(cursor, connection, namespace, owner, plans, now, expire_at) -> set[str]:
    if flagged := flagged_jobs(cursor, namespace, [o.job_id for o, *_ in plans]):
        honour_plans(cursor, namespace, plans, flagged, now)
    tokens = [f"{o.job_id}:{o.epoch}" for o, *_ in plans]
    cursor.execute(
        "DELETE FROM later_job_execution WHERE namespace = %s AND owner = %s "
        f"AND job_id || ':' || epoch IN ({placeholders(len(tokens))}) RETURNING job_id",
        [namespace, owner, *tokens],
    )
    held = {row[0] for row in cursor.fetchall()}
    plans = [p for p in plans if p[0].job_id in held]
    if not plans:
        return held
    # A record that could not be decoded keeps its bytes but still expires with its job.
    cursor.executemany(
        "UPDATE later_storage SET value = COALESCE(%s, value), date_expire = %s "
        "WHERE namespace = %s AND key = %s",
        [
            (
                o.record.encode() if o.record is not None else None,
                to_db(connection, expire_at) if t else None,
                namespace,
                job_key(o.job_id),
            )
            for o, _, _, t in plans
        ],
    )
    cursor.executemany(
        "UPDATE later_jobs_index SET stage = %s, finished_at = %s, transitioned_at = %s, "
        "run_at = %s, date_expire = %s, attempts = attempts + %s, revision = revision + 1 "
        "WHERE namespace = %s AND job_id = %s",
        [
            (
                stage,
                to_db(connection, o.finished_at) if t else None,
                to_db(connection, now),
                to_db(connection, run_at),
                to_db(connection, expire_at) if t else None,
                o.attempts_delta,
                namespace,
                o.job_id,
            )
            for o, stage, run_at, t in plans
        ],
    )
    gone = [o.job_id for o, stage, _, _ in plans if stage != Stage.ENQUEUED]
    back = [o.job_id for o, stage, _, _ in plans if stage == Stage.ENQUEUED]
    if gone:
        cursor.execute(
            f"DELETE FROM later_delivery_queue WHERE namespace = %s "
            f"AND job_id IN ({placeholders(len(gone))})",
            [namespace, *gone],
        )
    if back:
        cursor.execute(
            "UPDATE later_delivery_queue SET lease_owner = NULL, available_at = %s "
            f"WHERE namespace = %s AND job_id IN ({placeholders(len(back))})",
            [to_db(connection, now), namespace, *back],
        )
    return held
