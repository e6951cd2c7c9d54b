"""Unblocking a partition by hand: skip its head, retry its head now, release its lease.

Each operation names the head it means (the job id a person saw) and runs in
one transaction that first locks the partition's head row, the lock claiming
and outcomes take first too, so it never interleaves with a claim or with the
outcome of the head. If the head has changed meanwhile the operation is
refused: the partition moved on without help. Each one adds a note to the
head job's history.

Fencing: skipping a running head deletes its execution lease, and releasing a
lease clears its owner. Either way the worker that held it can no longer
renew the lease or settle the head, and the next claim raises the partition's
epoch, so that worker's late outcome is refused however long it takes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import F
from django.utils import timezone

from ..db import from_db, to_db, write_transaction
from ..exceptions import InvalidTransition
from ..models import JobIndexRow
from ..records import Note, to_micros
from ..sql import dialect
from ..states import PENDING, Stage
from ..topics.completion import PARTITION, advance
from . import jobs
from .reads import load_record


@dataclass
class Locked:
    sequence: int
    job_id: str
    available_at: datetime | None
    stage: str | None
    owner: str | None
    epoch: int | None
    expires_at: datetime | None

    def lease_live(self, now: datetime) -> bool:
        return self.owner is not None and self.expires_at is not None and self.expires_at > now


def _lock_head(cursor, namespace: str, topic: str, partition: int, job_id: str) -> Locked:
    cursor.execute(
        "SELECT h.sequence, h.job_id, h.available_at, j.stage, l.owner, l.epoch, l.expires_at "
        "FROM later_partition_head h LEFT JOIN later_jobs_index j "
        "ON j.namespace = h.namespace AND j.job_id = h.job_id "
        "LEFT JOIN later_partition_lease l ON l.namespace = h.namespace AND l.topic = h.topic "
        'AND l."partition" = h."partition" '
        'WHERE h.namespace = %s AND h.topic = %s AND h."partition" = %s'
        + dialect(cursor.db).LOCK_HEAD,
        [namespace, topic, partition],
    )
    row = cursor.fetchone()
    if row is None or row[1] != job_id:
        now_head = f"job {row[1]!r}" if row else "no job"
        raise InvalidTransition(
            f"The head of {topic}[{partition}] is {now_head}, not job {job_id!r}: the "
            "partition moved on meanwhile; look at it again."
        )
    sequence, head_id, available_at, stage, owner, epoch, expires_at = row
    return Locked(
        sequence, head_id, from_db(available_at), stage, owner, epoch, from_db(expires_at)
    )


def _note(namespace: str, job_id: str, text: str, at: datetime, using: str) -> None:
    """Add ``text`` to the job's history, in the caller's transaction."""
    found = load_record(namespace, job_id, using=using)
    if found is None:
        return
    record = found[1]
    record.notes.append(Note(to_micros(at) or 0, text))
    jobs._save_record(namespace, record, using, found[0].date_expire)


def skip_head(
    namespace: str, topic: str, partition: int, job_id: str, *, reason: str, by: str
) -> str:
    """Cancel the head ``job_id`` with ``reason`` and move the partition to its next job.

    A pending head can be skipped, and a running one whose partition lease has
    lapsed (its worker stopped). Returns "advanced", "emptied" or "deferred"
    (a producer holds the partition; the next claim moves it on).
    """
    using = jobs.options_for(namespace).database
    with write_transaction(using) as cursor:
        now = timezone.now()
        head = _lock_head(cursor, namespace, topic, partition, job_id)
        stages: tuple[Stage, ...] = PENDING
        if head.stage == Stage.RUNNING:
            if head.lease_live(now):
                raise InvalidTransition(
                    f"Job {job_id!r} is running under a live lease of {head.owner}; release "
                    f"the lease of {topic}[{partition}] first, or cancel nothing."
                )
            stages = (*PENDING, Stage.RUNNING)
        jobs.cancel(
            job_id,
            namespace=namespace,
            reason=reason,
            stages=stages,
            note=f"skipped as head of {topic}[{partition}] by {by}",
        )
        cursor.execute(
            f"DELETE FROM later_partition_job WHERE {PARTITION} AND sequence = %s",
            [namespace, topic, partition, head.sequence],
        )
        return advance(cursor, namespace, [(topic, partition)], now)[(topic, partition)]


def retry_head_now(namespace: str, topic: str, partition: int, job_id: str, *, by: str) -> None:
    """Make a head that waits for its retry runnable now; its attempt count is unchanged."""
    using = jobs.options_for(namespace).database
    with write_transaction(using) as cursor:
        now = timezone.now()
        head = _lock_head(cursor, namespace, topic, partition, job_id)
        if head.stage != Stage.REQUEUED:
            raise InvalidTransition(
                f"Job {job_id!r} is {head.stage or 'unknown'}; only a requeued head (waiting "
                "for its retry) can be retried now."
            )
        stamp = to_db(cursor.db, now)
        cursor.execute(
            f"UPDATE later_partition_head SET available_at = %s WHERE {PARTITION}",
            [stamp, namespace, topic, partition],
        )
        cursor.execute(
            f"UPDATE later_partition_job SET available_at = %s WHERE {PARTITION} AND sequence = %s",
            [stamp, namespace, topic, partition, head.sequence],
        )
        JobIndexRow.objects.using(using).filter(
            namespace=namespace, job_id=job_id, stage=Stage.REQUEUED
        ).update(run_at=now, revision=F("revision") + 1)
        was = f" (was due {head.available_at:%Y-%m-%d %H:%M:%S})" if head.available_at else ""
        _note(namespace, job_id, f"retry brought forward by {by}{was}", now, using)


def release_lease(namespace: str, topic: str, partition: int, job_id: str, *, by: str) -> str:
    """Expire the partition's lease now and clear its owner; return the owner it had.

    A running head becomes runnable at once, so a worker takes it over with a
    higher epoch. If the owner is in fact alive, the job runs again on the
    new worker and the old worker's outcome is refused.
    """
    using = jobs.options_for(namespace).database
    with write_transaction(using) as cursor:
        now = timezone.now()
        head = _lock_head(cursor, namespace, topic, partition, job_id)
        if head.owner is None:
            raise InvalidTransition(
                f"The lease of {topic}[{partition}] has no owner to release; any worker may "
                "take the head already."
            )
        stamp = to_db(cursor.db, now)
        cursor.execute(
            f"UPDATE later_partition_lease SET owner = NULL, expires_at = %s WHERE {PARTITION}",
            [stamp, namespace, topic, partition],
        )
        if head.stage == Stage.RUNNING:
            # Claiming pushed the head's available_at to the lease expiry; bring it back.
            cursor.execute(
                f"UPDATE later_partition_head SET available_at = %s WHERE {PARTITION}",
                [stamp, namespace, topic, partition],
            )
        _note(
            namespace,
            job_id,
            f"lease of {topic}[{partition}] (owner {head.owner}, epoch {head.epoch}) "
            f"released by {by}",
            now,
            using,
        )
        return head.owner
