"""Reads behind the triage desk: every blocked or stalled partition of a namespace.

One statement over ``later_partition_head`` (one row per active partition,
never the queued rows) joined to each head's lease and index row finds the
partitions, longest blocked first, at most ``DESK_LIMIT`` of them; a second
counts the jobs queued behind each head, each count stopping at ``BEHIND_CAP``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connections

from ..db import from_db, to_db
from ..jobs import backend_for
from ..states import Stage
from .scope import Scope
from .topics import _when

DESK_LIMIT = 200
BEHIND_CAP = 1_000

# Why a partition is listed. A requeued head waits for its retry; a running head whose
# lease lapsed (or was released) waits for a worker to take it over; a runnable head
# nobody has taken for longer than a lease has no worker serving it.
BLOCKED = f"""
SELECT h.topic, h."partition", h.sequence, h.job_id, h.available_at, j.stage, j.attempts,
       j.queue_name, l.owner, l.epoch, l.expires_at,
       CASE WHEN j.stage = '{Stage.RUNNING}' THEN COALESCE(l.expires_at, h.available_at)
            WHEN j.stage = '{Stage.REQUEUED}' AND h.available_at > %(now)s THEN j.transitioned_at
            ELSE h.available_at END AS since
FROM later_partition_head h
JOIN later_jobs_index j ON j.namespace = h.namespace AND j.job_id = h.job_id
LEFT JOIN later_partition_lease l
    ON l.namespace = h.namespace AND l.topic = h.topic AND l."partition" = h."partition"
WHERE h.namespace = %(ns)s AND (
    (j.stage = '{Stage.REQUEUED}' AND h.available_at > %(now)s)
    OR (j.stage IN ('{Stage.RUNNING}', '{Stage.ENQUEUED}', '{Stage.REQUEUED}')
        AND (l.owner IS NULL OR l.expires_at IS NULL OR l.expires_at <= %(now)s)
        AND (j.stage = '{Stage.RUNNING}' OR h.available_at <= %(stale)s)))
ORDER BY since, h.topic, h."partition"
LIMIT %(limit)s
"""


@dataclass
class Blocked:
    topic: str
    partition: int
    sequence: int
    job_id: str
    stage: str
    attempts: int
    queue_name: str
    available_at: datetime | None
    owner: str | None
    epoch: int | None
    expires_at: datetime | None
    since: datetime | None
    kind: str = ""  # "retrying", "lapsed", "released" or "untaken"
    reason: str = ""
    behind: int = 0
    behind_capped: bool = False

    @property
    def actions(self) -> tuple[str, ...]:
        """What a person may do here; every partition listed can be skipped."""
        if self.kind == "retrying":
            return ("retry", "skip")
        if self.kind == "lapsed":
            return ("release", "skip")
        return ("skip",)


def blocked(scope: Scope, now: datetime) -> tuple[list[Blocked], bool]:
    """The first ``DESK_LIMIT`` blocked partitions, longest blocked first; and whether more."""
    lease = timedelta(seconds=backend_for(scope.namespace).later.lease_seconds)
    connection = connections[scope.database]
    params = {
        "ns": scope.namespace,
        "now": to_db(connection, now),
        "stale": to_db(connection, now - lease),
        "limit": DESK_LIMIT + 1,
    }
    with connection.cursor() as cursor:
        cursor.execute(BLOCKED, params)
        found = cursor.fetchall()
    rows = []
    for (
        topic,
        partition,
        seq,
        job_id,
        avail,
        stage,
        attempts,
        queue,
        owner,
        epoch,
        exp,
        since,
    ) in found[:DESK_LIMIT]:
        row = Blocked(
            topic,
            partition,
            seq,
            job_id,
            stage,
            attempts,
            queue,
            from_db(avail),
            owner,
            epoch,
            from_db(exp),
            from_db(since),
        )
        _explain(row, now)
        rows.append(row)
    for row, (behind, capped) in zip(rows, _behind(scope, rows), strict=True):
        row.behind, row.behind_capped = behind, capped
    return rows, len(found) > DESK_LIMIT


def _explain(row: Blocked, now: datetime) -> None:
    if row.stage == Stage.REQUEUED and row.available_at is not None and row.available_at > now:
        row.kind = "retrying"
        row.reason = (
            f"attempt {row.attempts} failed; the head waits for its retry at "
            f"{_when(row.available_at)} and holds every job behind it"
        )
    elif row.stage == Stage.RUNNING and row.owner is not None:
        row.kind = "lapsed"
        row.reason = (
            f"the lease of {row.owner} (epoch {row.epoch}) expired at {_when(row.expires_at)} "
            "while the head was running; no worker has taken it over"
        )
    elif row.stage == Stage.RUNNING:
        row.kind = "released"
        row.reason = "the lease was released; the running head waits for a worker to take it"
    else:
        row.kind = "untaken"
        row.reason = (
            f"the head may run but no worker has taken it for longer than a lease: is a worker "
            f"serving queue {row.queue_name!r}?"
        )


def _behind(scope: Scope, rows: list[Blocked]) -> list[tuple[int, bool]]:
    """Jobs queued behind each head, each count stopping at ``BEHIND_CAP``, in one statement."""
    if not rows:
        return []
    part = (
        "SELECT %s, (SELECT COUNT(*) FROM (SELECT 1 FROM later_partition_job WHERE "
        'namespace = %s AND topic = %s AND "partition" = %s AND sequence > %s LIMIT %s) AS q)'
    )
    params: list[str | int] = []
    for index, row in enumerate(rows):
        params += [index, scope.namespace, row.topic, row.partition, row.sequence, BEHIND_CAP + 1]
    with connections[scope.database].cursor() as cursor:
        cursor.execute(" UNION ALL ".join([part] * len(rows)), params)
        counts = dict(cursor.fetchall())
    return [
        (min(int(counts[i]), BEHIND_CAP), int(counts[i]) > BEHIND_CAP) for i in range(len(rows))
    ]
