"""Operations on one job by id: look it up, retry it, cancel it, delete it.

These are what the dashboard's actions and user code call; each runs in one
transaction and checks the job's current stage in the same statement that
changes it, so it never races a worker into an impossible state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from ..db import write_transaction
from ..exceptions import InvalidTransition, JobNotFound, UndecodableJob
from ..models import DeliveryCommand, JobExecution, JobIndexRow, StorageValue
from ..options import BackendOptions, options_for_namespace
from ..records import ErrorEntry, JobRecord, Note, from_micros, job_key
from ..sql import dialect
from ..states import FINISHED, PENDING, RETRYABLE, Stage
from . import continuations
from .reads import load_record


def options_for(namespace: str) -> BackendOptions:
    """The parsed OPTIONS of the Later backend whose jobs live in ``namespace``;
    JobNotFound if none does."""
    later = options_for_namespace(namespace)
    if later is None:
        raise JobNotFound(f"No Later task backend uses namespace {namespace!r}.")
    return later


@dataclass
class JobView:
    """Everything known about one job, for people: the dashboard and the shell."""

    id: str
    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    queue_name: str
    priority: int
    stage: str
    attempts: int
    max_attempts: int
    enqueued_at: datetime | None
    run_after: datetime | None
    started_at: datetime | None
    finished_at: datetime | None
    worker_ids: list[str]
    errors: list[ErrorEntry]
    return_value: Any
    history: list[tuple[str, datetime | None]]
    topic: str | None
    partition: int | None
    sequence: int | None
    parent_id: str | None
    cancel_reason: str | None
    record: JobRecord
    decode_error: str | None = None  # why the stored record could not be read, if it could not


def get_job(job_id: str, *, namespace: str) -> JobView:
    """Describe one unexpired job; raise JobNotFound if there is none.

    A job whose stored record cannot be decoded is described from its index
    row, with ``decode_error`` saying why; its arguments read as empty.
    """
    found = load_record(namespace, job_id, using=options_for(namespace).database)
    if found is None:
        raise JobNotFound(f"No job {job_id!r} in namespace {namespace!r}.")
    row, record = found
    history: list[tuple[str, datetime | None]] = [(Stage.ENQUEUED, from_micros(record.enqueued_at))]
    if record.run_after:
        history.append(("due", from_micros(record.run_after)))
    for attempt in record.attempts:
        history.append((f"running on {attempt.worker_id}", from_micros(attempt.started_at)))
        if attempt.outcome:
            history.append((attempt.outcome, from_micros(attempt.finished_at)))
    if record.cancel_requested_at is not None:
        history.append(("cancel requested", from_micros(record.cancel_requested_at)))
    if record.notes or record.cancel_requested_at is not None:
        history += [(note.text, note.at_datetime) for note in record.notes]
        history.sort(key=lambda entry: (entry[1] is not None, entry[1]))
    history.append((f"now {row.stage}", row.transitioned_at))
    if record.decode_error is not None:
        return _from_index(row, record, history)
    return JobView(
        id=record.id,
        task_path=record.task_path,
        args=record.args,
        kwargs=record.kwargs,
        queue_name=record.queue_name,
        priority=record.priority,
        stage=row.stage,
        attempts=len(record.attempts),
        max_attempts=record.max_attempts,
        enqueued_at=from_micros(record.enqueued_at),
        run_after=from_micros(record.run_after),
        started_at=from_micros(record.attempts[0].started_at) if record.attempts else None,
        finished_at=from_micros(record.finished_at),
        worker_ids=record.worker_ids,
        errors=record.errors,
        return_value=record.return_value,
        history=history,
        topic=record.topic,
        partition=record.partition,
        sequence=record.sequence,
        parent_id=record.parent_id,
        cancel_reason=record.cancel_reason,
        record=record,
    )


def _from_index(
    row: JobIndexRow, record: JobRecord, history: list[tuple[str, datetime | None]]
) -> JobView:
    """A job whose record is a stand-in: the attempts and workers the index row counted."""
    return JobView(
        id=row.job_id,
        task_path=row.task_path,
        args=[],
        kwargs={},
        queue_name=row.queue_name,
        priority=row.priority,
        stage=row.stage,
        attempts=row.attempts,
        max_attempts=record.max_attempts,
        enqueued_at=row.enqueued_at,
        run_after=None,
        started_at=row.started_at,
        finished_at=row.finished_at,
        worker_ids=[row.worker_id] if row.worker_id else record.worker_ids,
        errors=record.errors,
        return_value=None,
        history=history,
        topic=row.topic,
        partition=row.partition,
        sequence=row.sequence,
        parent_id=row.parent_job_id,
        cancel_reason=record.cancel_reason,
        record=record,
        decode_error=record.decode_error,
    )


def _stage_error(
    job_id: str, stage: str | None, action: str, allowed: tuple[str, ...]
) -> Exception:
    if stage is None:
        return JobNotFound(f"No job {job_id!r} exists to {action}.")
    return InvalidTransition(
        f"Job {job_id!r} is {stage}; only {', '.join(allowed)} jobs can be {action}."
    )


def _current_stage(namespace: str, job_id: str, using: str) -> str | None:
    return (
        JobIndexRow.objects.using(using)
        .filter(namespace=namespace, job_id=job_id)
        .values_list("stage", flat=True)
        .first()
    )


def _save_record(namespace: str, record: JobRecord, using: str, expire: datetime | None) -> None:
    StorageValue.objects.using(using).filter(namespace=namespace, key=job_key(record.id)).update(
        value=record.encode(), date_expire=expire
    )


def retry_job(job_id: str, *, namespace: str) -> None:
    """Run a failed or cancelled job again, granting it one more attempt.

    Raises UndecodableJob for a job whose stored record cannot be decoded: its
    arguments are lost, so running it again could only call the task wrongly.
    """
    later = options_for(namespace)
    using = later.database
    with write_transaction(using) as cursor:
        found = load_record(namespace, job_id, using=using)
        if found is not None and found[0].stage in RETRYABLE and found[1].decode_error:
            raise UndecodableJob(
                f"Job {job_id!r} cannot be retried because its arguments are lost: "
                f"{found[1].decode_error} Delete it and enqueue the call again."
            )
        stage = Stage.ENQUEUED
        if found is not None and found[0].stage in RETRYABLE and found[1].parent_id is not None:
            stage = continuations.stage_on_retry(namespace, found[1], using=using)
        now = timezone.now()
        changed = (
            JobIndexRow.objects.using(using)
            .filter(namespace=namespace, job_id=job_id, stage__in=RETRYABLE)
            .update(
                stage=stage,
                transitioned_at=now,
                run_at=now,
                finished_at=None,
                date_expire=None,
                cancel_requested_at=None,
                revision=F("revision") + 1,
            )
        )
        if not changed or found is None:
            raise _stage_error(
                job_id, _current_stage(namespace, job_id, using), "retried", RETRYABLE
            )
        _, record = found
        failures = sum(1 for a in record.attempts if a.outcome in ("error", "timeout"))
        record.max_attempts = max(record.max_attempts, failures + 1)
        record.finished_at = None
        record.cancel_reason = None
        record.cancel_requested_at = None
        record.return_value = None
        record.stage = stage
        if record.topic is not None:
            # An ordered job goes back to the tail of its partition, never the shared queue.
            from ..topics.enqueueing import requeue_in_partition
            from .enqueue import NewJob

            requeue_in_partition(
                later, NewJob(record=record, stage=stage, run_at=now, enqueued_at=now)
            )
            _save_record(namespace, record, using, None)
            return
        _save_record(namespace, record, using, None)
        if stage == Stage.WAITING:
            return  # its parent's completion releases it
        DeliveryCommand.objects.using(using).create(
            namespace=namespace,
            queue_name=record.queue_name,
            job_id=job_id,
            priority=record.priority,
            available_at=now,
            enqueued_at=now,
        )
        dialect(cursor.db).notify_queued(cursor, namespace)


def cancel_job(job_id: str, *, namespace: str, reason: str = "cancelled") -> None:
    """Cancel a job that has not started; it ends ``cancelled`` with ``reason`` kept.

    A record that cannot be decoded is replaced by its stand-in (which keeps
    the stored bytes), so the cancellation and its reason are recorded too.
    """
    cancel(job_id, namespace=namespace, reason=reason)


def cancel(
    job_id: str,
    *,
    namespace: str,
    reason: str,
    stages: tuple[Stage, ...] = PENDING,
    note: str | None = None,
) -> None:
    """Cancel a job in one of ``stages``, adding ``note`` to its history if given.

    Cancelling a ``running`` job deletes its execution lease, so the outcome
    its worker may still store is refused as from a lease taken over. Only
    callers that know the job is stalled (its lease has lapsed) pass it.
    """
    later = options_for(namespace)
    using = later.database
    with write_transaction(using) as cursor:
        now = timezone.now()
        expire = now + timedelta(seconds=later.retention_seconds)
        changed = (
            JobIndexRow.objects.using(using)
            .filter(namespace=namespace, job_id=job_id, stage__in=stages)
            .update(
                stage=Stage.CANCELLED,
                transitioned_at=now,
                finished_at=now,
                date_expire=expire,
                revision=F("revision") + 1,
            )
        )
        if not changed:
            raise _stage_error(
                job_id, _current_stage(namespace, job_id, using), "cancelled", stages
            )
        DeliveryCommand.objects.using(using).filter(namespace=namespace, job_id=job_id).delete()
        if Stage.RUNNING in stages:
            JobExecution.objects.using(using).filter(namespace=namespace, job_id=job_id).delete()
        found = load_record(namespace, job_id, using=using)
        if found is not None:
            record = found[1]
            record.stage = Stage.CANCELLED
            record.cancel_reason = reason
            record.finished_at = int(now.timestamp() * 1_000_000)
            if note is not None:
                record.notes.append(Note(record.finished_at, note))
            _save_record(namespace, record, using, expire)
        continuations.cancel_descendants(cursor, namespace, [job_id], Stage.CANCELLED, now, expire)


def delete_job(job_id: str, *, namespace: str) -> None:
    """Delete a finished job's record and index row now, before its retention ends."""
    later = options_for(namespace)
    using = later.database
    with transaction.atomic(using=using):
        deleted, _ = (
            JobIndexRow.objects.using(using)
            .filter(namespace=namespace, job_id=job_id, stage__in=FINISHED)
            .delete()
        )
        if not deleted:
            raise _stage_error(
                job_id, _current_stage(namespace, job_id, using), "deleted", FINISHED
            )
        StorageValue.objects.using(using).filter(namespace=namespace, key=job_key(job_id)).delete()
