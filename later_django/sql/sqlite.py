"""SQLite's job-state SQL: a few statements in the caller's write transaction.

SQLite has one writer at a time, and the engine opens every write transaction
with the write lock (``db.write_transaction``), so no statement here needs a
row lock: nothing else writes until the transaction ends.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from ..db import placeholders, to_db
from ..records import job_key
from ..states import FINISHED, Stage
from .shared import BATCH, INDEX_COLUMNS, SAME_PARTITION, SHARE_AT, left_over, pick_heads

if TYPE_CHECKING:
    from ..engine.enqueue import NewJob
    from ..topics.assignment import Preference

ALONE = False
LOCK = ""
LOCK_HEAD = ""
SKIP_LOCKED = ""


def insert_jobs(cursor: Any, namespace: str, jobs: Sequence[NewJob]) -> None:
    """Write new jobs: one statement a table (``executemany`` for more than one job)."""
    times = _held_times(cursor.db, jobs)
    _insert(
        cursor,
        "INSERT INTO later_storage (namespace, key, value) VALUES (%s, %s, %s)",
        [(namespace, job_key(j.record.id), j.encoded()) for j in jobs],
    )
    _insert(
        cursor,
        f"INSERT INTO later_jobs_index ({INDEX_COLUMNS}) "
        "VALUES (%s, %s, %s, %s, %s, %s, 1, 0, %s, %s, %s, %s, %s, %s, %s)",
        [
            (
                namespace,
                j.record.id,
                j.record.task_path,
                j.record.queue_name,
                j.record.priority,
                j.stage,
                enqueued_at,
                run_at,
                enqueued_at,
                j.record.topic,
                j.record.partition,
                j.record.sequence,
                j.record.parent_id,
            )
            for j, (enqueued_at, run_at) in zip(jobs, times, strict=True)
        ],
    )
    queued = [
        (namespace, j.record.queue_name, j.record.id, j.record.priority, run_at, enqueued_at)
        for j, (enqueued_at, run_at) in zip(jobs, times, strict=True)
        if j.stage == Stage.ENQUEUED and j.record.topic is None
    ]
    if queued:
        _insert(
            cursor,
            "INSERT INTO later_delivery_queue "
            "(namespace, queue_name, job_id, priority, available_at, enqueued_at) "
            "VALUES (%s, %s, %s, %s, %s, %s)",
            queued,
        )


def _held_times(connection: Any, jobs: Sequence[NewJob]) -> list[tuple[Any, Any]]:
    """Each job's enqueue and run times as the database holds them. The jobs of one call
    share their times, and a job to run at once has one time for both, so each distinct
    time is converted once: Django's conversion cost a bulk enqueue 5 µs a job."""
    held: dict[datetime, Any] = {}

    def as_held(value: datetime) -> Any:
        if value not in held:
            held[value] = to_db(connection, value)
        return held[value]

    return [(as_held(j.enqueued_at), as_held(j.run_at)) for j in jobs]


def _insert(cursor: Any, sql: str, rows: list[tuple]) -> None:
    """One row by ``execute``, which costs a lone enqueue less than ``executemany``."""
    if len(rows) == 1:
        cursor.execute(sql, rows[0])
    else:
        cursor.executemany(sql, rows)


def insert_batches(cursor: Any, namespace: str, batches: Iterable[Sequence[NewJob]]) -> None:
    """All the batches' jobs at once: SQLite works in this process, so nothing is gained
    by writing one batch while the next is built, and one ``executemany`` a table costs
    less than one a batch."""
    insert_jobs(cursor, namespace, [job for jobs in batches for job in jobs])


def claim(
    cursor: Any,
    namespace: str,
    owner: str,
    queues: list[str] | None,
    now: datetime,
    expires: datetime,
    room: int,
) -> tuple[list[tuple], bool]:
    """Lease ready commands, take their execution leases, mark them running, read them;
    and whether ready commands may be left that this claim did not take."""
    connection = cursor.db
    queue_filter = ""
    params: list[object] = [namespace, to_db(connection, now)]
    if queues:
        queue_filter = f"AND queue_name IN ({placeholders(len(queues))})"
        params.extend(queues)
    cursor.execute(
        "SELECT id, job_id, enqueued_at, available_at FROM later_delivery_queue "
        f"WHERE namespace = %s AND available_at <= %s {queue_filter} "
        "AND lease_owner IS NOT %s "
        f"ORDER BY priority DESC, available_at, id LIMIT {BATCH}",
        [*params, owner],
    )
    rows = cursor.fetchall()
    take = rows[: min(room, BATCH)] if len(rows) >= SHARE_AT else rows[:1]
    if not take:
        return [], False
    ids = [r[1] for r in take]
    cursor.execute(
        "UPDATE later_delivery_queue SET lease_owner = %s, available_at = %s "
        f"WHERE id IN ({placeholders(len(take))})",
        [owner, to_db(connection, expires), *[r[0] for r in take]],
    )
    previous = _owners(cursor, namespace, ids)
    values = ", ".join(["(%s, %s, %s, 1, %s, %s)"] * len(ids))
    lease_params: list[object] = []
    for job_id in ids:
        lease_params += [
            namespace,
            job_id,
            owner,
            to_db(connection, now),
            to_db(connection, expires),
        ]
    cursor.execute(
        "INSERT INTO later_job_execution "
        "(namespace, job_id, owner, epoch, started_at, lease_expires_at) "
        f"VALUES {values} ON CONFLICT (namespace, job_id) DO UPDATE SET "
        "owner = excluded.owner, epoch = later_job_execution.epoch + 1, "
        "started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at "
        "RETURNING job_id, epoch",
        lease_params,
    )
    epochs = dict(cursor.fetchall())
    values_by_id = _start(cursor, namespace, owner, ids, to_db(connection, now))
    claimed = [
        (
            job_id,
            enqueued_at,
            ready_at,
            epochs[job_id],
            previous.get(job_id),
            values_by_id.get(job_id),
        )
        for _, job_id, enqueued_at, ready_at in take
    ]
    return claimed, left_over(len(rows), len(take))


def _owners(cursor: Any, namespace: str, ids: list[str]) -> dict[str, str]:
    """Who held each job's execution lease before this claim (a lost attempt's worker)."""
    cursor.execute(
        "SELECT job_id, owner FROM later_job_execution "
        f"WHERE namespace = %s AND job_id IN ({placeholders(len(ids))})",
        [namespace, *ids],
    )
    return dict(cursor.fetchall())


def _start(cursor: Any, namespace: str, owner: str, ids: list[str], stamp: Any) -> dict:
    """Mark claimed jobs running on ``owner``; return their records' bytes by job id."""
    marks = placeholders(len(ids))
    cursor.execute(
        f"UPDATE later_jobs_index SET stage = '{Stage.RUNNING}', attempts = attempts + 1, "
        "started_at = %s, transitioned_at = %s, worker_id = %s, revision = revision + 1 "
        f"WHERE namespace = %s AND job_id IN ({marks})",
        [stamp, stamp, owner, namespace, *ids],
    )
    cursor.execute(
        f"SELECT key, value FROM later_storage WHERE namespace = %s AND key IN ({marks})",
        [namespace, *[job_key(i) for i in ids]],
    )
    return {key[4:]: value for key, value in cursor.fetchall()}


def mark_parents(cursor: Any, namespace: str, ids: list[str], now: datetime) -> list[tuple]:
    cursor.execute(
        "UPDATE later_jobs_index SET has_children = TRUE WHERE namespace = %s "
        f"AND job_id IN ({placeholders(len(ids))}) "
        "AND (date_expire IS NULL OR date_expire > %s) "
        "RETURNING job_id, stage, topic, partition",
        [namespace, *ids, to_db(cursor.db, now)],
    )
    return cursor.fetchall()


def execute_each(cursor: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
    cursor.executemany(statement, rows)


def notify_queued(cursor: Any, namespace: str) -> None:
    """Nothing to send: idle SQLite workers watch the database for commits."""


def notify_cancel(cursor: Any, namespace: str) -> None:
    """Nothing to send: SQLite workers look for cancel requests at every heartbeat."""


def record_outcomes(
    cursor: Any,
    namespace: str,
    owner: str,
    plans: list,
    now: datetime,
    expire_at: datetime,
    honoured: bool,
) -> tuple[set[str], set[str]]:
    """Store the outcomes; unless ``honoured``, those of jobs with a cancel request come
    back unstored (flagged). The write transaction keeps any new request out meanwhile."""
    connection = cursor.db
    flagged: set[str] = set()
    if not honoured:
        flagged = _flagged(cursor, namespace, [o.job_id for o, *_ in plans])
        plans = [p for p in plans if p[0].job_id not in flagged]
        if not plans:
            return set(), flagged
    tokens = [f"{o.job_id}:{o.epoch}" for o, *_ in plans]
    cursor.execute(
        "DELETE FROM later_job_execution WHERE namespace = %s AND owner = %s "
        f"AND job_id || ':' || epoch IN ({placeholders(len(tokens))}) RETURNING job_id",
        [namespace, owner, *tokens],
    )
    held = {row[0] for row in cursor.fetchall()}
    plans = [p for p in plans if p[0].job_id in held]
    if not plans:
        return held, flagged
    # A record that could not be decoded keeps its bytes but still expires with its job.
    cursor.executemany(
        "UPDATE later_storage SET value = COALESCE(%s, value), date_expire = %s "
        "WHERE namespace = %s AND key = %s",
        [
            (
                o.record.encode() if o.record is not None else None,
                to_db(connection, expire_at) if t else None,
                namespace,
                job_key(o.job_id),
            )
            for o, _, _, t in plans
        ],
    )
    cursor.executemany(
        "UPDATE later_jobs_index SET stage = %s, finished_at = %s, transitioned_at = %s, "
        "run_at = %s, date_expire = %s, attempts = attempts + %s, revision = revision + 1 "
        "WHERE namespace = %s AND job_id = %s",
        [
            (
                stage,
                to_db(connection, o.finished_at) if t else None,
                to_db(connection, now),
                to_db(connection, run_at),
                to_db(connection, expire_at) if t else None,
                o.attempts_delta,
                namespace,
                o.job_id,
            )
            for o, stage, run_at, t in plans
        ],
    )
    gone = [o.job_id for o, stage, _, _ in plans if stage != Stage.ENQUEUED]
    back = [o.job_id for o, stage, _, _ in plans if stage == Stage.ENQUEUED]
    if gone:
        cursor.execute(
            f"DELETE FROM later_delivery_queue WHERE namespace = %s "
            f"AND job_id IN ({placeholders(len(gone))})",
            [namespace, *gone],
        )
    if back:
        cursor.execute(
            "UPDATE later_delivery_queue SET lease_owner = NULL, available_at = %s "
            f"WHERE namespace = %s AND job_id IN ({placeholders(len(back))})",
            [to_db(connection, now), namespace, *back],
        )
    return held, flagged


def _flagged(cursor: Any, namespace: str, job_ids: list[str]) -> set[str]:
    """Which of ``job_ids`` have a cancel request."""
    cursor.execute(
        f"SELECT job_id FROM later_jobs_index WHERE namespace = %s AND job_id IN "
        f"({placeholders(len(job_ids))}) AND cancel_requested_at IS NOT NULL",
        [namespace, *job_ids],
    )
    return {row[0] for row in cursor.fetchall()}


def record_alone(
    cursor: Any,
    namespace: str,
    owner: str,
    plans: list,
    now: datetime,
    expire_at: datetime,
) -> tuple[set[str], set[str]]:
    raise NotImplementedError("SQLite stores outcomes in a write transaction (ALONE is False)")


# -- partition heads (topics) ----------------------------------------------------------


# Lists travel as one JSON parameter each, so the statement's text stays the same.
_PICK = partial(
    pick_heads,
    one_of=lambda values: ("IN (SELECT value FROM json_each(%s))", json.dumps(list(values))),
    none_of=lambda values: ("NOT IN (SELECT value FROM json_each(%s))", json.dumps(list(values))),
    lock="",
)


def take_heads(
    cursor: Any,
    namespace: str,
    owner: str,
    now: datetime,
    expires: datetime,
    room: int,
    preference: Preference,
    queues: list[str] | None,
    running: set[str],
) -> tuple[list[tuple], list[tuple[tuple, tuple]]]:
    """Pick heads, then lease and start the runnable ones, in a few statements."""
    sql, params = _PICK(cursor.db, namespace, now, room, preference, queues, running)
    cursor.execute(sql, params)
    rows = cursor.fetchall()
    heads = [r for r in rows if r[6] is not None and r[6] not in FINISHED]
    return rows, (_lease(cursor, namespace, owner, heads, now, expires) if heads else [])


def _lease(cursor, namespace, owner, heads, now, expires) -> list[tuple[tuple, tuple]]:
    """Take the partition and execution leases of ``heads`` and mark their jobs running."""
    connection = cursor.db
    stamp, until = to_db(connection, now), to_db(connection, expires)
    cursor.execute(
        'INSERT INTO later_partition_lease (namespace, topic, "partition", owner, expires_at, '
        "epoch) VALUES "
        + ", ".join(["(%s, %s, %s, %s, %s, 1)"] * len(heads))
        + ' ON CONFLICT (namespace, topic, "partition") DO UPDATE SET owner = excluded.owner, '
        "expires_at = excluded.expires_at, epoch = later_partition_lease.epoch + 1 "
        'RETURNING topic, "partition", epoch',
        [v for h in heads for v in (namespace, h[1], h[2], owner, until)],
    )
    epochs = {(topic, partition): epoch for topic, partition, epoch in cursor.fetchall()}
    ids = [h[4] for h in heads]
    previous = _owners(cursor, namespace, ids)
    cursor.execute(
        "INSERT INTO later_job_execution "
        "(namespace, job_id, owner, epoch, started_at, lease_expires_at) VALUES "
        + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(heads))
        + " ON CONFLICT (namespace, job_id) DO UPDATE SET owner = excluded.owner, "
        "epoch = excluded.epoch, started_at = excluded.started_at, "
        "lease_expires_at = excluded.lease_expires_at",
        [v for h in heads for v in (namespace, h[4], owner, epochs[(h[1], h[2])], stamp, until)],
    )
    cursor.execute(
        f"UPDATE later_partition_head SET available_at = %s "
        f"WHERE id IN ({placeholders(len(heads))})",
        [until, *[h[0] for h in heads]],
    )
    raw = _start(cursor, namespace, owner, ids, stamp)
    return [
        (h, (h[4], h[7] or now, h[5], epochs[(h[1], h[2])], previous.get(h[4]), raw.get(h[4])))
        for h in heads
    ]


def held_partitions(
    cursor: Any, namespace: str, places: list[tuple[str, int]]
) -> set[tuple[str, int]]:
    """None: a producer's sequence allocation and its partition row commit together,
    and no one else writes in between."""
    return set()


def next_rows(
    cursor: Any, namespace: str, places: list[tuple[str, int]], now: datetime
) -> list[tuple]:
    cursor.execute(
        'SELECT j.topic, j."partition", j.sequence, j.job_id, MAX(j.available_at, %s) '
        "FROM later_partition_job j WHERE j.namespace = %s "
        f'AND (j.topic, j."partition") IN ({", ".join(["(%s, %s)"] * len(places))}) '
        "AND j.sequence = (SELECT MIN(m.sequence) FROM later_partition_job m WHERE "
        'm.namespace = j.namespace AND m.topic = j.topic AND m."partition" = j."partition")',
        [to_db(cursor.db, now), namespace, *[v for place in places for v in place]],
    )
    return cursor.fetchall()


# SQLite plans the join from the heads.
TRUNCATE = (
    "DELETE FROM later_partition_job WHERE id IN (SELECT j.id FROM later_partition_job j "
    "JOIN later_partition_head h ON "
    + SAME_PARTITION.format(a="h", b="j")
    + " WHERE j.namespace = %(ns)s AND j.sequence < h.sequence LIMIT %(limit)s)"
)


# -- upkeep ----------------------------------------------------------------------------


# The index's triggers update the totals directly (one writer at a time).
COUNT_DELTAS = False


def fold_counts(cursor: Any) -> None:
    """Nothing: no deltas are kept."""


def lock_for_recount(cursor: Any, timeout_ms: int) -> None:
    """Nothing: the write transaction already keeps every other writer out."""


def analyze_stale(cursor: Any, tables: Sequence[str], slack: int) -> list[str]:
    """None: SQLite's planner needs no statistics to pick the claim's index."""
    return []
