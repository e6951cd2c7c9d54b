"""Recording what happened to claimed jobs, many at a time, fenced by lease.

One transaction per batch: first the execution leases this worker still holds
are deleted (owner and epoch must match, so a worker whose lease was taken over
writes nothing for that job), then the records, index rows and queue commands
of the jobs it still held are updated together. On PostgreSQL all of that is
one statement over arrays (``sql.postgres``; ``sql.sqlite`` for SQLite).

A job whose cancel was requested while it ran (``cancel_requested_at`` on its
index row, which the statements lock first) is held back from that statement
and stored in a transaction that first gives its outcome what the cancel asks
(``honouring.honour``).
"""

from __future__ import annotations

import logging
from datetime import timedelta

from django.db import DatabaseError
from django.utils import timezone

from ..db import connection_for, hot_cursor, placeholders, retrying, write_transaction
from ..sql import dialect
from ..states import Stage
from ..topics import completion as partitions
from . import continuations
from .attempt import CANCELLED, FAILED, RELEASE, RETRY, SUCCESS, Outcome, plan, planned
from .honouring import honour_plans

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
    sql = dialect(connection)
    if sql.ALONE and not connection.in_atomic_block and _plain(outcomes):
        with hot_cursor(using) as cursor:
            held, deferred = sql.record_alone(cursor, namespace, owner, plans, now, expire_at)
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
    if len(written) < len(outcomes):
        fenced = [o for o in outcomes if o.job_id not in held]
        reasons = _why_fenced(namespace, owner, fenced, using)
        for o in fenced:
            logger.warning(
                "fenced: job id=%s epoch=%s %s; outcome %s not stored",
                o.job_id,
                o.epoch,
                reasons.get(o.job_id, "is no longer leased to this worker"),
                o.kind,
            )
    return written


def _why_fenced(namespace: str, owner: str, fenced: list[Outcome], using: str) -> dict[str, str]:
    """For the log line of each refused outcome: what became of its job's lease.

    A refused outcome is rare, and the operator reading its line wants to know
    whether another worker took the job over (this one paused past its lease),
    or someone released or deleted it, so it is worth one read.
    """
    ids = [o.job_id for o in fenced]
    try:
        with connection_for(using).cursor() as cursor:
            cursor.execute(
                "SELECT job_id, owner, epoch FROM later_job_execution "
                f"WHERE namespace = %s AND job_id IN ({placeholders(len(ids))})",
                [namespace, *ids],
            )
            leases = {job_id: (holder, epoch) for job_id, holder, epoch in cursor.fetchall()}
            cursor.execute(
                "SELECT job_id, stage, worker_id FROM later_jobs_index "
                f"WHERE namespace = %s AND job_id IN ({placeholders(len(ids))})",
                [namespace, *ids],
            )
            rows = {job_id: (stage, worker) for job_id, stage, worker in cursor.fetchall()}
    except DatabaseError:
        return {}  # the line still says the outcome was refused
    reasons = {}
    for job_id in ids:
        if job_id in leases:
            holder, epoch = leases[job_id]
            reasons[job_id] = f"was taken over by worker {holder} (epoch {epoch})"
        elif job_id not in rows:
            reasons[job_id] = "was deleted"
        else:
            stage, worker = rows[job_id]
            last = f", last run by worker {worker}" if worker and worker != owner else ""
            reasons[job_id] = f"is no longer leased to this worker (the job is {stage}{last})"
    return reasons


def _plain(outcomes: list[Outcome]) -> bool:
    """Whether no outcome can touch a partition head: no topic job, no unreadable record."""
    return not any(o.may_touch_partition for o in outcomes)


def _record_with_settling(connection, namespace, owner, plans, now, expire_at, using) -> set[str]:
    """Store outcomes, advance partition heads and settle children, in one transaction."""
    outcomes = [o for o, *_ in plans]
    with write_transaction(using, hot=True) as cursor:
        # Before the execution leases; plain jobs have no heads and skip the topics code.
        heads = {} if _plain(outcomes) else partitions.lock_heads(cursor, namespace, outcomes)
        sql = dialect(connection)
        held, flagged = sql.record_outcomes(
            cursor, namespace, owner, plans, now, expire_at, honoured=False
        )
        if flagged:
            again = honour_plans(cursor, namespace, plans, flagged, now)
            more, _ = sql.record_outcomes(
                cursor, namespace, owner, again, now, expire_at, honoured=True
            )
            held |= more
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
