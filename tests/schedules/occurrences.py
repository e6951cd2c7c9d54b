"""Read back the jobs a schedule enqueued, from their stored records."""

from __future__ import annotations

from datetime import datetime

from later_django.models import JobIndexRow, StorageValue
from later_django.records import JobRecord, from_micros
from tests.models import Execution


def occurrences(identifier: str) -> list[JobRecord]:
    """Every job of schedule ``identifier``, oldest due first."""
    found = []
    for key, value in StorageValue.objects.filter(
        namespace="tests", key__startswith="job:"
    ).values_list("key", "value"):
        record = JobRecord.decode(bytes(value), job_id=key[4:])
        if record.schedule == identifier:
            found.append(record)
    return sorted(found, key=lambda r: r.run_after or 0)


def due_times(identifier: str) -> list[datetime]:
    return [from_micros(r.run_after) for r in occurrences(identifier)]  # type: ignore[misc]


def stage(job_id: str) -> str:
    return JobIndexRow.objects.get(namespace="tests", job_id=job_id).stage


def spans(kind: str) -> list[tuple[float, float]]:
    """(start, end) of every run of ``tasks.spans`` for ``kind``, by start."""
    values = Execution.objects.filter(kind=kind).values_list("value", flat=True)
    return sorted(tuple(float(t) for t in value.split("-")) for value in values)  # type: ignore[misc]
