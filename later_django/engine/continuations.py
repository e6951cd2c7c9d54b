"""Continuations: jobs that wait in stage ``waiting`` until their parent job succeeds.

A continuation is enqueued with ``task.using(after=parent).enqueue(...)``. Its
fate is settled in the transaction that ends its parent: success releases it
(``enqueued``, or ``delayed`` while its own ``run_after`` is in the future);
failure or cancellation cancels it and every waiting descendant, each with a
reason naming its parent. The enqueuer sets ``has_children`` on the parent's
index row, which locks it until the enqueuer commits (PostgreSQL; SQLite
serialises writers), and the completing worker locks the parent rows before
settling children, so a child committed concurrently with its parent's
completion is always either seen as waiting by the release or inserted after
it, seeing the parent's final stage: none is left waiting forever. A worker
stores the outcomes of jobs without children in one statement; a finished job
with children goes through the transaction that settles them.

A continuation of an occurrence of a sequential schedule joins that
occurrence's partition of the reserved topic ``later.schedules``, so it runs
before the schedule's next occurrence.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from django.utils import timezone

from ..db import connection_for, placeholders, to_db, write_transaction
from ..exceptions import InvalidArgument, InvalidTransition, JobNotFound, PayloadDecodeError
from ..records import JobRecord, job_key, to_micros
from ..sql import dialect
from ..states import UNFINISHED, UNSUCCESSFUL, Stage
from ..topics import SCHEDULES_TOPIC
from .enqueue import NewJob, insert_jobs

if TYPE_CHECKING:
    from ..options import BackendOptions

_WAITING, _CANCELLED = f"'{Stage.WAITING}'", f"'{Stage.CANCELLED}'"


def cancel_reason(parent_id: str, parent_stage: str) -> str:
    return f"Cancelled because its parent job {parent_id!r} ended {parent_stage}."


def check_parent_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(
            f"after is {value!r}; it must be a TaskResult or the id (a string) of a job."
        )
    return value


def _parent_rows(cursor: Any, namespace: str, ids: list[str], now: datetime) -> dict[str, tuple]:
    """Mark the parents as having children and read their rows: id -> (stage, topic, partition).

    The update locks each parent's index row until the caller's transaction
    ends (on PostgreSQL in job id order, so two enqueuers never deadlock), and
    reads the stage it has once any completion holding that lock committed.
    """
    rows = dialect(cursor.db).mark_parents(cursor, namespace, ids, now)
    return {row[0]: row[1:] for row in rows}


def insert_continuations(later: BackendOptions, jobs: Sequence[NewJob]) -> None:
    """Store continuations, each in the stage its parent's current stage calls for.

    Raises JobNotFound, writing nothing, when a parent is unknown (or expired).
    A child of a parent that already failed or was cancelled is stored
    ``cancelled`` at once; of one that succeeded, runnable at once.
    """
    namespace, using = later.namespace, later.database
    wanted = sorted({check_parent_id(j.record.parent_id) for j in jobs})
    with write_transaction(using) as cursor:
        now = timezone.now()
        parents = _parent_rows(cursor, namespace, wanted, now)
        missing = [parent_id for parent_id in wanted if parent_id not in parents]
        if not missing:
            _insert(later, cursor, jobs, parents, now)
    if missing:
        # Raised outside the write block, which may be the caller's own transaction:
        # a refusal must leave it usable.
        raise JobNotFound(
            f"after is {missing[0]!r}; no job with that id exists in namespace "
            f"{namespace!r} (it may have expired), so there is nothing to continue."
        )


def _insert(
    later: BackendOptions, cursor: Any, jobs: Sequence[NewJob], parents: dict, now: datetime
) -> None:
    namespace = later.namespace
    doomed: dict[str, str] = {}
    joining: list[NewJob] = []
    for job in jobs:
        assert job.record.parent_id is not None
        stage, topic, partition = parents[job.record.parent_id]
        if stage == Stage.SUCCESS:
            job.stage = Stage.DELAYED if job.run_at > now else Stage.ENQUEUED
        else:
            job.stage = Stage.WAITING
            if stage in UNSUCCESSFUL:
                doomed[job.record.id] = cancel_reason(job.record.parent_id, stage)
                continue
        if topic == SCHEDULES_TOPIC and job.record.topic is None:
            # A continuation of a sequential occurrence runs before the next occurrence.
            job.record.topic, job.record.partition = topic, partition
            joining.append(job)
    if joining:
        from ..topics.enqueueing import place

        place(cursor, later, joining)
    insert_jobs(namespace, jobs, using=later.database)
    if doomed:
        expire_at = now + timedelta(seconds=later.retention_seconds)
        _cancel(cursor, namespace, doomed, now, expire_at)
        for job in jobs:
            if job.record.id in doomed:
                job.stage = Stage.CANCELLED
                job.record.cancel_reason = doomed[job.record.id]


def settle(
    cursor: Any,
    namespace: str,
    *,
    succeeded: list[str],
    failed: list[str],
    now: datetime,
    expire_at: datetime,
    cancelled: list[str] | None = None,
) -> None:
    """Release the waiting children of ``succeeded`` jobs and cancel those of ``failed``
    and ``cancelled`` ones, each with a reason naming the stage its parent ended in.

    Runs in the transaction that ends the parents, after their index rows were
    updated (or locked): that waited out any enqueuer still holding the lock on
    a parent's row, so its child is visible to the statements below (each
    statement takes a fresh snapshot under READ COMMITTED).
    """
    if succeeded:
        release_children(cursor, namespace, succeeded, now)
    if failed:
        cancel_descendants(cursor, namespace, failed, Stage.FAILED, now, expire_at)
    if cancelled:
        cancel_descendants(cursor, namespace, cancelled, Stage.CANCELLED, now, expire_at)


def release_children(cursor: Any, namespace: str, parents: list[str], now: datetime) -> list[str]:
    """Make the waiting children of ``parents`` runnable; return their ids.

    Children of a topic partition get no queue command: their partition's head
    claiming runs them in order once they are no longer ``waiting``.
    """
    connection = cursor.db
    stamp = to_db(connection, now)
    cursor.execute(
        "UPDATE later_jobs_index SET "
        f"stage = CASE WHEN run_at > %s THEN '{Stage.DELAYED}' ELSE '{Stage.ENQUEUED}' END, "
        "transitioned_at = %s, revision = revision + 1 "
        f"WHERE namespace = %s AND stage = {_WAITING} AND parent_job_id IN "
        f"({placeholders(len(parents))}) "
        "RETURNING job_id, stage, queue_name, priority, enqueued_at, topic",
        [stamp, stamp, namespace, *parents],
    )
    released = cursor.fetchall()
    commands = [
        (namespace, queue_name, job_id, priority, stamp, enqueued_at)
        for job_id, stage, queue_name, priority, enqueued_at, topic in released
        if stage == Stage.ENQUEUED and topic is None
    ]
    if commands:
        dialect(cursor.db).execute_each(
            cursor,
            "INSERT INTO later_delivery_queue "
            "(namespace, queue_name, job_id, priority, available_at, enqueued_at) "
            "VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (namespace, job_id) DO NOTHING",
            commands,
        )
        dialect(connection).notify_queued(cursor, namespace)
    return [row[0] for row in released]


def cancel_descendants(
    cursor: Any,
    namespace: str,
    parents: list[str],
    parent_stage: str,
    now: datetime,
    expire_at: datetime,
) -> list[str]:
    """Cancel every waiting descendant of ``parents``, generation by generation; return ids."""
    connection = cursor.db
    cancelled: list[str] = []
    frontier, stage = list(parents), parent_stage
    while frontier:
        cursor.execute(
            "SELECT job_id, parent_job_id FROM later_jobs_index WHERE namespace = %s "
            f"AND stage = {_WAITING} AND parent_job_id IN ({placeholders(len(frontier))})"
            + dialect(connection).LOCK,
            [namespace, *frontier],
        )
        children = {job_id: cancel_reason(parent, stage) for job_id, parent in cursor.fetchall()}
        frontier = _cancel(cursor, namespace, children, now, expire_at)
        cancelled += frontier
        stage = Stage.CANCELLED
    return cancelled


def _cancel(
    cursor: Any, namespace: str, reasons: dict[str, str], now: datetime, expire_at: datetime
) -> list[str]:
    """End waiting jobs ``cancelled`` with their reasons kept in their records."""
    if not reasons:
        return []
    connection = cursor.db
    ids = sorted(reasons)
    stamp, expiry = to_db(connection, now), to_db(connection, expire_at)
    cursor.execute(
        f"UPDATE later_jobs_index SET stage = {_CANCELLED}, finished_at = %s, "
        "transitioned_at = %s, date_expire = %s, revision = revision + 1 "
        f"WHERE namespace = %s AND stage = {_WAITING} "
        f"AND job_id IN ({placeholders(len(ids))}) RETURNING job_id",
        [stamp, stamp, expiry, namespace, *ids],
    )
    done = sorted(row[0] for row in cursor.fetchall())
    if not done:
        return []
    cursor.execute(
        "SELECT key, value FROM later_storage "
        f"WHERE namespace = %s AND key IN ({placeholders(len(done))})",
        [namespace, *[job_key(i) for i in done]],
    )
    updates = []
    for key, raw in cursor.fetchall():
        job_id = key[4:]
        try:
            record = JobRecord.decode(bytes(raw), job_id=job_id)
        except PayloadDecodeError:
            # The index row already says cancelled; an undecodable record only expires.
            updates.append((bytes(raw), expiry, namespace, key))
            continue
        record.stage = Stage.CANCELLED
        record.cancel_reason = reasons[job_id]
        record.finished_at = to_micros(now)
        updates.append((record.encode(), expiry, namespace, key))
    dialect(cursor.db).execute_each(
        cursor,
        "UPDATE later_storage SET value = %s, date_expire = %s WHERE namespace = %s AND key = %s",
        updates,
    )
    return done


def stage_on_retry(namespace: str, record: JobRecord, *, using: str) -> Stage:
    """The stage a retried continuation starts in: ``waiting`` while its parent is pending.

    Raises InvalidTransition when the parent failed or was cancelled: retry the
    parent first. A parent that succeeded or is gone (expired) lets it run now.
    """
    assert record.parent_id is not None
    with connection_for(using).cursor() as cursor:
        found = _parent_rows(cursor, namespace, [record.parent_id], timezone.now())
    stage = found.get(record.parent_id, (Stage.SUCCESS,))[0]
    if stage in UNSUCCESSFUL:
        raise InvalidTransition(
            f"Job {record.id!r} continues job {record.parent_id!r}, which is {stage}; "
            "retry the parent first, then this job."
        )
    return Stage.WAITING if stage in UNFINISHED else Stage.ENQUEUED
