"""Reads behind the schedules view: each schedule, when it runs next, how its last run went."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Q

from ..models import JobIndexRow
from ..schedules.store import ScheduleInfo, read_all
from ..states import UNFINISHED
from .scope import Scope

SCHEDULE_LIMIT = 200
# Workers fire a due schedule within a poll interval (at most a second); one
# still due after this long has no worker firing it.
OVERDUE_AFTER = timedelta(minutes=1)


@dataclass
class ScheduleRow:
    schedule: ScheduleInfo
    # "paused", "scheduled", "due", "waiting" (sequential, for its last run) or "overdue"
    state: str
    last_stage: str | None  # of the last occurrence's job; None once it has expired


def state_of(schedule: ScheduleInfo, last_stage: str | None, now: datetime) -> str:
    if schedule.paused:
        return "paused"
    if schedule.next_run_at > now:
        return "scheduled"
    if schedule.sequential and last_stage in UNFINISHED:
        return "waiting"
    if now - schedule.next_run_at > OVERDUE_AFTER:
        return "overdue"
    return "due"


def schedules(scope: Scope, now: datetime) -> tuple[list[ScheduleRow], bool]:
    """The namespace's first schedules by identifier, and whether there are more."""
    found = read_all(scope.namespace, using=scope.database, limit=SCHEDULE_LIMIT + 1)
    shown = found[:SCHEDULE_LIMIT]
    last_ids = [s.last_job_id for s in shown if s.last_job_id]
    stages = dict(
        JobIndexRow.objects.using(scope.database)
        .filter(namespace=scope.namespace, job_id__in=last_ids)
        .filter(Q(date_expire=None) | Q(date_expire__gt=now))
        .values_list("job_id", "stage")
    )
    rows = []
    for schedule in shown:
        last_stage = stages.get(schedule.last_job_id) if schedule.last_job_id else None
        rows.append(ScheduleRow(schedule, state_of(schedule, last_stage, now), last_stage))
    return rows, len(found) > SCHEDULE_LIMIT
