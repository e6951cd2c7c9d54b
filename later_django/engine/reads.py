"""Reading one job back: its index row and its decoded record."""

from __future__ import annotations

from typing import Any

from django.db.models import Q
from django.utils import timezone

from ..exceptions import PayloadDecodeError
from ..models import JobIndexRow, StorageValue
from ..records import ErrorEntry, JobRecord, job_key, to_micros


def live(now: Any) -> Q:
    return Q(date_expire__isnull=True) | Q(date_expire__gt=now)


def load_record(namespace: str, job_id: str, *, using: str) -> tuple[JobIndexRow, JobRecord] | None:
    """The index row and decoded record of an unexpired job, or None.

    A record that cannot be decoded comes back as a ``stand_in`` with the
    decode error as its newest error, so a broken job can still be shown,
    cancelled and deleted.
    """
    now = timezone.now()
    row = (
        JobIndexRow.objects.using(using)
        .filter(live(now), namespace=namespace, job_id=job_id)
        .first()
    )
    if row is None:
        return None
    raw = (
        StorageValue.objects.using(using)
        .filter(live(now), namespace=namespace, key=job_key(job_id))
        .values_list("value", flat=True)
        .first()
    )
    if raw is None:
        return None
    try:
        return row, JobRecord.decode(bytes(raw), job_id=job_id)
    except PayloadDecodeError as e:
        record = stand_in(row, bytes(raw), e)
        record.errors.append(
            ErrorEntry(
                exception_class_path=f"{PayloadDecodeError.__module__}.PayloadDecodeError",
                traceback=f"{PayloadDecodeError.__module__}.PayloadDecodeError: {e}\n",
                at=to_micros(row.transitioned_at) or 0,
            )
        )
        return row, record


def stand_in(row: JobIndexRow, raw: bytes, error: PayloadDecodeError) -> JobRecord:
    """A record rebuilt from a job's index row, for a job whose stored record cannot be decoded.

    It has the task, queue, priority, times and partition place the index row
    holds; its arguments are unknown (empty here), its ``decode_error`` says
    why, and ``original_bytes`` keeps what was stored, for whoever investigates.
    """
    return JobRecord(
        id=row.job_id,
        task_path=row.task_path,
        args=[],
        kwargs={},
        queue_name=row.queue_name,
        priority=row.priority,
        backend="",
        enqueued_at=to_micros(row.enqueued_at) or 0,
        max_attempts=max(row.attempts, 1),
        finished_at=to_micros(row.finished_at),
        stage=row.stage,
        parent_id=row.parent_job_id,
        topic=row.topic,
        partition=row.partition,
        sequence=row.sequence,
        decode_error=str(error),
        original_bytes=raw,
    )
