"""Keyset-paginated job listings and the index reads of the job detail page.

Every query here reads at most a page (or a fixed scan window) of
``later_jobs_index`` or ``later_delivery_queue`` through one of their indexes;
none uses OFFSET or counts a table.

Queued jobs without a topic are not in the job index's listing indexes (their
enqueue writes no entry there); their delivery commands list them instead,
newest command first, and the queued jobs of topics follow, by the index.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from ..db import django_time
from ..models import DeliveryCommand, JobExecution, JobIndexRow, PartitionLease
from ..states import Stage
from .scope import Scope

PAGE_SIZE = 50
QUEUE_SCAN_LIMIT = 5000
IN_CHUNK = 500  # job ids per IN list when reading the index rows of queued jobs
CONTINUATION_LIMIT = 50
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CURSOR_RE = re.compile(r"^(-?\d{1,20})\.(\d{1,20})$")
QUEUE_CURSOR_RE = re.compile(r"^q(\d{1,20})$")
ROW_ID_MAX = 2**63 - 1  # a 64-bit primary key; PostgreSQL refuses a larger bound
ORDER = ("-transitioned_at", "-id")


class BadCursor(ValueError):
    """A cursor from the query string is not one this page wrote."""


@dataclass(frozen=True)
class Cursor:
    """A position in a stage listing: the last row's (transitioned_at, id)."""

    transitioned_at: datetime
    row_id: int

    def __str__(self) -> str:
        moment = self.transitioned_at
        if timezone.is_naive(moment):  # USE_TZ off: local time, as Django reads it
            moment = timezone.make_aware(moment)
        micros = (moment - EPOCH) // timedelta(microseconds=1)
        return f"{micros}.{self.row_id}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        match = CURSOR_RE.match(text)
        if match is None:
            raise BadCursor(
                f"Cursor {text!r} is not valid; it must be '<microseconds>.<row id>' or "
                "'q<row id>' as written by the page's own links."
            )
        micros, row_id = (int(part) for part in match.groups())
        if row_id > ROW_ID_MAX:
            raise BadCursor(f"Cursor {text!r} names a row id out of range.")
        try:
            moment = django_time(EPOCH + timedelta(microseconds=micros))
        except OverflowError as e:
            raise BadCursor(f"Cursor {text!r} names a time out of range.") from e
        return cls(moment, row_id)

    @classmethod
    def of(cls, row: JobIndexRow) -> Cursor:
        return cls(row.transitioned_at, row.pk)


@dataclass(frozen=True)
class QueueCursor:
    """A position among the delivery commands of queued jobs: the last command's id."""

    command_id: int

    def __str__(self) -> str:
        return f"q{self.command_id}"


# The enqueued page's position after its last command: where its topics' jobs begin.
# Later than any transition, and not datetime.max: a local time ahead of UTC (USE_TZ
# off) would overflow past it.
TOPICS_START = Cursor(datetime(9000, 1, 1, tzinfo=UTC), ROW_ID_MAX)


def parse_cursor(text: str) -> Cursor | QueueCursor:
    """A cursor from a listing's link: ``<microseconds>.<row id>``, or ``q<command id>``."""
    match = QUEUE_CURSOR_RE.match(text)
    if match is None:
        return Cursor.parse(text)
    command_id = int(match.group(1))
    if command_id > ROW_ID_MAX:
        raise BadCursor(f"Cursor {text!r} names a row id out of range.")
    return QueueCursor(command_id)


def visible(now: datetime) -> Q:
    """Rows not yet past their expiry; expired rows are invisible before the sweep."""
    return Q(date_expire__isnull=True) | Q(date_expire__gt=now)


def older_than(cursor: Cursor) -> Q:
    moment = cursor.transitioned_at
    # The redundant lte bound lets the planner start its index range scan at the cursor.
    return Q(transitioned_at__lte=moment) & (
        Q(transitioned_at__lt=moment) | Q(transitioned_at=moment, id__lt=cursor.row_id)
    )


@dataclass
class JobPage:
    rows: list[JobIndexRow]
    next_cursor: Cursor | QueueCursor | None
    scanned: int | None  # set when a filter looked through a full scan window


def jobs_by_stage(
    scope: Scope,
    stage: str,
    now: datetime,
    *,
    task: str = "",
    queue: str = "",
    after: Cursor | QueueCursor | None = None,
    limit: int | None = None,
) -> JobPage:
    """One page of a stage's jobs, newest transition first.

    A task filter follows ``later_jobsindex_task_idx``. No index covers the
    queue name, so a queue filter looks through at most ``QUEUE_SCAN_LIMIT``
    rows of the stage per page and, when that window ends before the page
    fills, returns a cursor that continues the search from the window's end.

    The enqueued stage lists its jobs without a topic from the delivery queue,
    newest command first (``queued_jobs``), then those of topics by the index.
    """
    limit = limit or PAGE_SIZE
    if stage == Stage.ENQUEUED and not isinstance(after, Cursor):
        found = queued_jobs(scope, now, task=task, queue=queue, after=after, limit=limit)
        if found.next_cursor is not None:
            return found
        room = limit - len(found.rows)
        rest = _by_index(scope, stage, now, task=task, queue=queue, after=None, limit=max(room, 1))
        if room <= 0:  # the commands filled the page: topics' jobs, if any, start the next
            return JobPage(found.rows, TOPICS_START if rest.rows else None, None)
        return JobPage(found.rows + rest.rows, rest.next_cursor, rest.scanned)
    if isinstance(after, QueueCursor):  # a cursor of the enqueued page used on another
        raise BadCursor(f"Cursor {str(after)!r} belongs to the enqueued jobs' page.")
    return _by_index(scope, stage, now, task=task, queue=queue, after=after, limit=limit)


def queued_jobs(
    scope: Scope,
    now: datetime,
    *,
    task: str = "",
    queue: str = "",
    after: QueueCursor | None = None,
    limit: int = PAGE_SIZE,
) -> JobPage:
    """A page of the queued jobs that have a delivery command, newest command first.

    Commands a worker holds (their jobs run) are skipped. With a task or queue
    filter the page looks through at most ``QUEUE_SCAN_LIMIT`` commands, as the
    index listing's queue filter does. A page ends without a cursor when the
    commands run out; the queued jobs of topics come after them.
    """
    commands = DeliveryCommand.objects.using(scope.database).filter(
        namespace=scope.namespace, lease_owner__isnull=True
    )
    if after is not None:
        commands = commands.filter(id__lt=after.command_id)
    filtered = bool(task or queue)
    window = list(
        commands.order_by("-id").values_list("id", "job_id", "queue_name")[
            : QUEUE_SCAN_LIMIT if filtered else limit + 1
        ]
    )
    wanted = [(cid, job_id) for cid, job_id, name in window if not queue or name == queue]
    index_rows = JobIndexRow.objects.using(scope.database).filter(
        visible(now), namespace=scope.namespace, stage=Stage.ENQUEUED
    )
    if task:
        index_rows = index_rows.filter(task_path=task)
    found: dict[str, JobIndexRow] = {}
    for start in range(0, len(wanted), IN_CHUNK):
        chunk = [job_id for _, job_id in wanted[start : start + IN_CHUNK]]
        found.update((row.job_id, row) for row in index_rows.filter(job_id__in=chunk))
    if not filtered:
        shown = window[:limit]
        rows = [found[job_id] for _, job_id, _ in shown if job_id in found]
        return JobPage(rows, QueueCursor(shown[-1][0]) if len(window) > limit else None, None)
    listed = [(cid, found[job_id]) for cid, job_id in wanted if job_id in found]
    if len(listed) > limit:
        return JobPage([row for _, row in listed[:limit]], QueueCursor(listed[limit - 1][0]), None)
    rows = [row for _, row in listed]
    if len(window) < QUEUE_SCAN_LIMIT:
        return JobPage(rows, None, None)
    return JobPage(rows, QueueCursor(window[-1][0]), QUEUE_SCAN_LIMIT)


def _by_index(
    scope: Scope,
    stage: str,
    now: datetime,
    *,
    task: str,
    queue: str,
    after: Cursor | None,
    limit: int,
) -> JobPage:
    base = JobIndexRow.objects.using(scope.database).filter(
        visible(now), namespace=scope.namespace, stage=stage
    )
    if stage == Stage.ENQUEUED:  # the rest are listed from the delivery queue
        base = base.filter(topic__isnull=False)
    if task:
        base = base.filter(task_path=task)
    if after is not None:
        base = base.filter(older_than(after))
    base = base.order_by(*ORDER)
    if not queue:
        rows = list(base[: limit + 1])
        return JobPage(
            rows[:limit], Cursor.of(rows[limit - 1]) if len(rows) > limit else None, None
        )
    # Read the window's narrow columns and pick the queue in Python: a SQL filter
    # on queue_name tempts the planner into scanning the whole table.
    window = list(base.values_list("id", "transitioned_at", "queue_name")[:QUEUE_SCAN_LIMIT])
    wanted = [row_id for row_id, _, name in window if name == queue][: limit + 1]
    found = JobIndexRow.objects.using(scope.database).in_bulk(wanted)
    rows = [found[row_id] for row_id in wanted if row_id in found]
    if len(rows) > limit:
        return JobPage(rows[:limit], Cursor.of(rows[limit - 1]), None)
    if len(window) < QUEUE_SCAN_LIMIT:
        return JobPage(rows, None, None)
    _, edge_at, _ = window[-1]
    return JobPage(rows, Cursor(edge_at, window[-1][0]), QUEUE_SCAN_LIMIT)


def index_row(scope: Scope, job_id: str) -> JobIndexRow | None:
    return (
        JobIndexRow.objects.using(scope.database)
        .filter(namespace=scope.namespace, job_id=job_id)
        .first()
    )


def partition_neighbours(
    scope: Scope, row: JobIndexRow
) -> tuple[JobIndexRow | None, JobIndexRow | None]:
    """The jobs just before and just after this one in its partition, if it has one."""
    if row.topic is None or row.partition is None or row.sequence is None:
        return None, None
    same = JobIndexRow.objects.using(scope.database).filter(
        namespace=scope.namespace, topic=row.topic, partition=row.partition
    )
    previous = same.filter(sequence__lt=row.sequence).order_by("-sequence").first()
    following = same.filter(sequence__gt=row.sequence).order_by("sequence").first()
    return previous, following


def continuations(
    scope: Scope, job_id: str, limit: int = CONTINUATION_LIMIT
) -> tuple[list[JobIndexRow], bool]:
    """Jobs enqueued to run after this one (oldest first), and whether more exist."""
    rows = list(
        JobIndexRow.objects.using(scope.database)
        .filter(namespace=scope.namespace, parent_job_id=job_id)
        .order_by("id")[: limit + 1]
    )
    return rows[:limit], len(rows) > limit


@dataclass(frozen=True)
class Lease:
    kind: str
    owner: str | None
    epoch: int
    expires_at: datetime | None


def lease(scope: Scope, row: JobIndexRow) -> Lease | None:
    """Who holds the job's execution or partition lease while it runs."""
    if row.stage != Stage.RUNNING:
        return None
    if row.topic is not None and row.partition is not None:
        held = (
            PartitionLease.objects.using(scope.database)
            .filter(namespace=scope.namespace, topic=row.topic, partition=row.partition)
            .first()
        )
        if held is None:
            return None
        return Lease("partition", held.owner, held.epoch, held.expires_at)
    execution = (
        JobExecution.objects.using(scope.database)
        .filter(namespace=scope.namespace, job_id=row.job_id)
        .first()
    )
    if execution is None:
        return None
    return Lease("execution", execution.owner, execution.epoch, execution.lease_expires_at)


def partition_jobs(
    scope: Scope, topic: str, partition: int, *, below: int | None, limit: int = PAGE_SIZE
) -> tuple[list[JobIndexRow], int | None]:
    """A page of one partition's jobs, highest sequence first, and the next page's bound."""
    rows = JobIndexRow.objects.using(scope.database).filter(
        namespace=scope.namespace, topic=topic, partition=partition
    )
    if below is not None:
        rows = rows.filter(sequence__lt=below)
    page = list(rows.order_by("-sequence")[: limit + 1])
    following = page[limit - 1].sequence if len(page) > limit else None
    return page[:limit], following
