"""Cancelling a job by id: at once when it has not started, by request while it runs.

``later_django.cancel()`` (``cancelling.py``, above the engine) checks its
arguments and calls ``cancel_by_id``.

A pending job (delayed, waiting, enqueued, requeued) ends ``cancelled`` at
once, with its waiting continuations. A running job cannot be stopped from
outside its worker, so its cancel is a request: its index row gets
``cancel_requested_at`` and its record the reason, and its worker sets the
job's ``context.cancel_requested`` flag (``worker/cancels.py``), interrupts it
past ``LATER_CANCEL_GRACE`` and stores it ``cancelled``. A running job whose
lease has lapsed has no live worker to ask: it ends ``cancelled`` at once, and
the worker that held it, if it wakes, is fenced off.

Concurrency: one transaction that locks the job's partition head (for a
running head), then its index row, then its execution lease: the order the
outcome path takes them in, so a cancel and an outcome never deadlock, and an
outcome stored after the request always sees it.
"""

from __future__ import annotations

from django.utils import timezone

from ..db import from_db, to_db, write_transaction
from ..exceptions import InvalidTransition, JobNotFound
from ..records import to_micros
from ..sql import dialect
from ..states import CANCELLABLE, PENDING, Stage
from ..topics.completion import PARTITION, advance
from . import jobs
from .reads import load_record


def cancel_by_id(job_id: str, *, namespace: str, reason: str) -> Stage:
    """Cancel a job of ``namespace``: ``later_django.cancel()`` and the dashboard call this."""
    using = jobs.options_for(namespace).database
    with write_transaction(using) as cursor:
        now = timezone.now()
        lock = dialect(cursor.db).LOCK
        head = _lock_running_head(cursor, namespace, job_id)
        cursor.execute(
            "SELECT stage, cancel_requested_at FROM later_jobs_index "
            "WHERE namespace = %s AND job_id = %s" + lock,
            [namespace, job_id],
        )
        row = cursor.fetchone()
        if row is None:
            raise JobNotFound(f"No job {job_id!r} exists in namespace {namespace!r} to cancel.")
        stage, requested_at = row
        if stage in PENDING:
            jobs.cancel(job_id, namespace=namespace, reason=reason, stages=PENDING)
            return Stage.CANCELLED
        if stage != Stage.RUNNING:
            raise InvalidTransition(
                f"Job {job_id!r} has already finished ({stage}), so there is nothing to cancel; "
                f"only {', '.join(CANCELLABLE)} jobs can be cancelled."
            )
        cursor.execute(
            "SELECT owner, lease_expires_at FROM later_job_execution "
            "WHERE namespace = %s AND job_id = %s" + lock,
            [namespace, job_id],
        )
        lease = cursor.fetchone()
        expires = from_db(lease[1]) if lease else None
        if expires is None or expires <= now:
            _end_stalled(cursor, namespace, job_id, reason, lease[0] if lease else None, head)
            return Stage.CANCELLED
        if requested_at is None:
            _request(cursor, namespace, job_id, reason, now, using)
        return Stage.RUNNING


def _lock_running_head(cursor, namespace: str, job_id: str) -> tuple[str, int, int] | None:
    """Lock the partition head of a running ordered job; return (topic, partition, sequence)
    if the job is its head. Locked before the index row, as claiming and outcomes do."""
    cursor.execute(
        "SELECT topic, partition FROM later_jobs_index WHERE namespace = %s AND job_id = %s "
        f"AND topic IS NOT NULL AND stage = '{Stage.RUNNING}'",
        [namespace, job_id],
    )
    place = cursor.fetchone()
    if place is None:
        return None
    cursor.execute(
        f"SELECT sequence, job_id FROM later_partition_head WHERE {PARTITION}"
        + dialect(cursor.db).LOCK,
        [namespace, *place],
    )
    head = cursor.fetchone()
    if head is None or head[1] != job_id:
        return None
    return place[0], place[1], head[0]


def _end_stalled(cursor, namespace, job_id, reason, owner, head) -> None:
    """Cancel a running job whose lease lapsed now; a head moves its partition on."""
    jobs.cancel(
        job_id,
        namespace=namespace,
        reason=reason,
        stages=(Stage.RUNNING,),
        note=f"cancelled at once: the lease of its worker {owner or '(none)'} had lapsed",
    )
    if head is not None:
        topic, partition, sequence = head
        cursor.execute(
            f"DELETE FROM later_partition_job WHERE {PARTITION} AND sequence = %s",
            [namespace, topic, partition, sequence],
        )
        advance(cursor, namespace, [(topic, partition)], timezone.now())


def _request(cursor, namespace: str, job_id: str, reason: str, now, using: str) -> None:
    """Mark the running job's index row and keep the reason in its record; wake its worker."""
    cursor.execute(
        "UPDATE later_jobs_index SET cancel_requested_at = %s WHERE namespace = %s AND job_id = %s",
        [to_db(cursor.db, now), namespace, job_id],
    )
    found = load_record(namespace, job_id, using=using)
    if found is not None and found[1].decode_error is None:
        row, record = found
        record.cancel_reason = reason
        record.cancel_requested_at = to_micros(now)
        jobs._save_record(namespace, record, using, row.date_expire)
    dialect(cursor.db).notify_cancel(cursor, namespace)
