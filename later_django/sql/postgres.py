"""PostgreSQL's job-state SQL: an enqueue, a claim or a batch of outcomes is one statement.

Each statement writes every table it touches in data-modifying CTEs, over
arrays for many jobs. Outside a caller's transaction it runs alone in
autocommit: one round trip, its own transaction. Row locks (``FOR UPDATE``,
``SKIP LOCKED`` for claims) keep concurrent workers and enqueuers apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from ..db import CANCEL_CHANNEL, NOTIFY_CHANNEL, placeholders, to_db
from ..states import FINISHED, Stage, sql_list
from .shared import (
    BATCH,
    INDEX_COLUMNS,
    SAME_PARTITION,
    SHARE_AT,
    left_over,
    pick_heads,
    stored_record,
)

if TYPE_CHECKING:
    from ..engine.enqueue import NewJob
    from ..topics.assignment import Preference

ALONE = True
LOCK = " FOR UPDATE"
LOCK_HEAD = " FOR UPDATE OF h"
SKIP_LOCKED = " FOR UPDATE SKIP LOCKED"


# -- enqueue ---------------------------------------------------------------------------

# The arrays travel in binary (%b): the text format quotes and escapes every
# element in Python, which cost more than building the jobs. Each statement
# appends its new jobs to the stage counters' deltas itself (``counted``): a
# statement trigger over a transition table did it until migration 0015, and
# its PL/pgSQL cost an enqueue more than the row it appends.
PG_INSERT = f"""
WITH job AS (
    SELECT * FROM unnest(
        %b::text[], %b::bytea[], %b::text[], %b::text[], %b::int[], %b::text[],
        %b::timestamptz[], %b::timestamptz[], %b::text[], %b::int[], %b::bigint[], %b::text[]
    ) AS t(job_id, value, task_path, queue_name, priority, stage,
           enqueued_at, run_at, topic, part, seq, parent_job_id)
), stored AS (
    INSERT INTO later_storage (namespace, key, value)
    SELECT %s, 'job:' || job_id, value FROM job
), indexed AS (
    INSERT INTO later_jobs_index ({INDEX_COLUMNS})
    SELECT %s, job_id, task_path, queue_name, priority, stage, 1, 0,
           enqueued_at, run_at, enqueued_at, topic, part, seq, parent_job_id
    FROM job
), counted AS (
    INSERT INTO later_stage_count_delta (namespace, stage, delta)
    SELECT %s, stage, COUNT(*) FROM job GROUP BY stage
), queued AS (
    INSERT INTO later_delivery_queue (namespace, queue_name, job_id, priority, available_at,
                                          enqueued_at)
    SELECT %s, queue_name, job_id, priority, run_at, enqueued_at FROM job
    WHERE stage = '{Stage.ENQUEUED}' AND topic IS NULL
    RETURNING 1
)
SELECT pg_notify('{NOTIFY_CHANNEL}', %s) FROM (SELECT 1 FROM queued LIMIT 1) AS any_queued
"""


# Many jobs of one task, enqueued together (``enqueue_many``): only the ids and the
# records differ, so only they travel as arrays; dumping ten arrays of equal values
# cost more than the server's work on them.
PG_INSERT_ALIKE = f"""
WITH job AS (
    SELECT * FROM unnest(%(ids)b::text[], %(values)b::bytea[]) AS t(job_id, value)
), stored AS (
    INSERT INTO later_storage (namespace, key, value)
    SELECT %(ns)s, 'job:' || job_id, value FROM job
), indexed AS (
    INSERT INTO later_jobs_index ({INDEX_COLUMNS})
    SELECT %(ns)s, job_id, %(task_path)s, %(queue)s, %(priority)s, %(stage)s, 1, 0,
           %(enqueued_at)s, %(run_at)s, %(enqueued_at)s, NULL, NULL, NULL, NULL
    FROM job
), counted AS (
    INSERT INTO later_stage_count_delta (namespace, stage, delta)
    SELECT %(ns)s, %(stage)s, COUNT(*) FROM job
), queued AS (
    INSERT INTO later_delivery_queue (namespace, queue_name, job_id, priority, available_at,
                                          enqueued_at)
    SELECT %(ns)s, %(queue)s, job_id, %(priority)s, %(run_at)s, %(enqueued_at)s FROM job
    WHERE %(stage)s = '{Stage.ENQUEUED}'
    RETURNING 1
)
SELECT pg_notify('{NOTIFY_CHANNEL}', %(ns)s) FROM (SELECT 1 FROM queued LIMIT 1) AS any_queued
"""


# One job, as scalars: psycopg adapts a dozen one-element arrays far more slowly.
PG_INSERT_ONE = f"""
WITH stored AS (
    INSERT INTO later_storage (namespace, key, value) VALUES (%(ns)s, 'job:' || %(id)s, %(value)s)
), indexed AS (
    INSERT INTO later_jobs_index ({INDEX_COLUMNS})
    VALUES (%(ns)s, %(id)s, %(task_path)s, %(queue)s, %(priority)s, %(stage)s, 1, 0,
            %(enqueued_at)s, %(run_at)s, %(enqueued_at)s, %(topic)s, %(part)s::int, %(seq)s::bigint,
            %(parent)s)
), counted AS (
    INSERT INTO later_stage_count_delta (namespace, stage, delta) VALUES (%(ns)s, %(stage)s, 1)
), queued AS (
    INSERT INTO later_delivery_queue (namespace, queue_name, job_id, priority, available_at,
                                          enqueued_at)
    SELECT %(ns)s, %(queue)s, %(id)s, %(priority)s, %(run_at)s, %(enqueued_at)s
    WHERE %(stage)s = '{Stage.ENQUEUED}' AND %(topic)s::text IS NULL
    RETURNING 1
)
SELECT pg_notify('{NOTIFY_CHANNEL}', %(ns)s) FROM (SELECT 1 FROM queued LIMIT 1) AS any_queued
"""


def insert_jobs(cursor: Any, namespace: str, jobs: Sequence[NewJob]) -> None:
    """Write new jobs with one statement: scalars for one job, arrays for many."""
    if len(jobs) == 1:
        job = jobs[0]
        cursor.execute(
            PG_INSERT_ONE,
            {
                "ns": namespace,
                "id": job.record.id,
                "value": job.encoded(),
                "task_path": job.record.task_path,
                "queue": job.record.queue_name,
                "priority": job.record.priority,
                "stage": job.stage,
                "enqueued_at": job.enqueued_at,
                "run_at": job.run_at,
                "topic": job.record.topic,
                "part": job.record.partition,
                "seq": job.record.sequence,
                "parent": job.record.parent_id,
            },
        )
        return
    first = jobs[0]
    if all(_alike(job, first) for job in jobs):
        cursor.execute(
            PG_INSERT_ALIKE,
            {
                "ids": [j.record.id for j in jobs],
                "values": [j.encoded() for j in jobs],
                "ns": namespace,
                "task_path": first.record.task_path,
                "queue": first.record.queue_name,
                "priority": first.record.priority,
                "stage": first.stage,
                "enqueued_at": first.enqueued_at,
                "run_at": first.run_at,
            },
        )
        return
    cursor.execute(
        PG_INSERT,
        [
            [j.record.id for j in jobs],
            [j.encoded() for j in jobs],
            [j.record.task_path for j in jobs],
            [j.record.queue_name for j in jobs],
            [j.record.priority for j in jobs],
            [j.stage for j in jobs],
            [j.enqueued_at for j in jobs],
            [j.run_at for j in jobs],
            [j.record.topic for j in jobs],
            [j.record.partition for j in jobs],
            [j.record.sequence for j in jobs],
            [j.record.parent_id for j in jobs],
            namespace,
            namespace,
            namespace,
            namespace,
            namespace,
        ],
    )


def insert_batches(cursor: Any, namespace: str, batches: Iterable[Sequence[NewJob]]) -> None:
    """One statement per batch, each sent while the server still writes the last one.

    In pipeline mode the results wait until the end, where the first error
    (already turned into Django's exception) is raised. A libpq too old for
    pipelines (before 14) sends them one at a time.
    """
    import psycopg

    connection = cursor.db
    pipeline = (
        connection.connection.pipeline() if psycopg.Pipeline.is_supported() else nullcontext()
    )
    with connection.wrap_database_errors, pipeline:
        for jobs in batches:
            insert_jobs(cursor, namespace, jobs)


def _alike(job: NewJob, first: NewJob) -> bool:
    """Whether ``job`` goes in the same rows as ``first`` but for its id and record."""
    record, model = job.record, first.record
    return (
        record.topic is None
        and record.parent_id is None
        and record.task_path == model.task_path
        and record.queue_name == model.queue_name
        and record.priority == model.priority
        and job.stage == first.stage
        and job.enqueued_at == first.enqueued_at
        and job.run_at == first.run_at
    )


# -- claims ----------------------------------------------------------------------------


PG_CLAIM = f"""
WITH picked AS (
    SELECT id, priority, available_at, lease_owner FROM later_delivery_queue
    WHERE namespace = %(ns)s AND available_at <= %(now)s {{queue_filter}}
      AND lease_owner IS DISTINCT FROM %(owner)s
    ORDER BY priority DESC, available_at, id
    LIMIT {{batch}} FOR UPDATE SKIP LOCKED
), ranked AS (
    SELECT id, available_at, lease_owner,
           row_number() OVER (ORDER BY priority DESC, available_at, id) AS position,
           count(*) OVER () AS ready
    FROM picked
), claimed AS (
    UPDATE later_delivery_queue AS q
    SET lease_owner = %(owner)s, available_at = %(expires)s
    FROM ranked
    WHERE q.id = ranked.id
      AND ranked.position <= CASE WHEN ranked.ready >= {{share_at}} THEN %(room)s ELSE 1 END
    RETURNING q.job_id, q.enqueued_at, ranked.available_at AS ready_at, ranked.position,
              ranked.ready, ranked.lease_owner AS previous_owner
), leased AS (
    INSERT INTO later_job_execution (namespace, job_id, owner, epoch, started_at, lease_expires_at)
    SELECT %(ns)s, job_id, %(owner)s, 1, %(now)s, %(expires)s FROM claimed
    ON CONFLICT (namespace, job_id) DO UPDATE SET
        owner = excluded.owner, epoch = later_job_execution.epoch + 1,
        started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at
    RETURNING job_id, epoch
), marked AS (
    UPDATE later_jobs_index SET stage = '{Stage.RUNNING}', attempts = attempts + 1,
        started_at = %(now)s, transitioned_at = %(now)s, worker_id = %(owner)s,
        revision = revision + 1
    WHERE namespace = %(ns)s AND job_id IN (SELECT job_id FROM claimed)
)
SELECT c.job_id, c.enqueued_at, c.ready_at, l.epoch, c.previous_owner,
       {stored_record("c.job_id", "%(ns)s")} AS value, c.ready
FROM claimed AS c
JOIN leased AS l ON l.job_id = c.job_id
ORDER BY c.position
"""


def claim(
    cursor: Any,
    namespace: str,
    owner: str,
    queues: list[str] | None,
    now: datetime,
    expires: datetime,
    room: int,
) -> tuple[list[tuple], bool]:
    """Lease ready commands, read their records and mark them running, in one statement.

    Returns the rows, and whether ready commands may be left that this claim did
    not take (see ``shared.left_over``).
    """
    queue_filter = "AND queue_name = ANY(%(queues)s)" if queues else ""
    cursor.execute(
        PG_CLAIM.format(queue_filter=queue_filter, batch=BATCH, share_at=SHARE_AT),
        {
            "ns": namespace,
            "now": now,
            "queues": list(queues or ()),
            "owner": owner,
            "expires": expires,
            "room": min(room, BATCH),
        },
    )
    rows = cursor.fetchall()
    if not rows:
        return rows, False
    return [row[:-1] for row in rows], left_over(rows[0][-1], len(rows))


# -- parents ---------------------------------------------------------------------------


def mark_parents(cursor: Any, namespace: str, ids: list[str], now: datetime) -> list[tuple]:
    """Lock the parents' rows in job id order, so two enqueuers never deadlock."""
    cursor.execute(
        "UPDATE later_jobs_index AS i SET has_children = TRUE FROM ("
        "SELECT id FROM later_jobs_index WHERE namespace = %s "
        f"AND job_id IN ({placeholders(len(ids))}) "
        "AND (date_expire IS NULL OR date_expire > %s) "
        "ORDER BY job_id FOR NO KEY UPDATE) AS parent "
        "WHERE i.id = parent.id RETURNING i.job_id, i.stage, i.topic, i.partition",
        [namespace, *ids, to_db(cursor.db, now)],
    )
    return cursor.fetchall()


def execute_each(cursor: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
    """One round trip a row, never a pipeline: between two statements the session is
    idle in its transaction, where the idle-transaction limit can end it."""
    for row in rows:
        cursor.execute(statement, row)


def notify_queued(cursor: Any, namespace: str) -> None:
    cursor.execute("SELECT pg_notify(%s, %s)", [NOTIFY_CHANNEL, namespace])


def notify_cancel(cursor: Any, namespace: str) -> None:
    cursor.execute("SELECT pg_notify(%s, %s)", [CANCEL_CHANNEL, namespace])


# -- outcomes --------------------------------------------------------------------------

# Arrays travel in binary (%b), which psycopg adapts without escaping each element.
_GIVEN = """unnest(
        %(job_ids)b::text[], %(epochs)b::bigint[], %(stages)b::text[], %(values)b::bytea[],
        %(finished)b::timestamptz[], %(run_at)b::timestamptz[], %(expire)b::timestamptz[],
        %(attempts)b::int[]
    ) AS t(job_id, epoch, stage, value, finished_at, run_at, date_expire, attempts_delta)"""

# Stores the outcomes in ``v``; returns (job id, deferred, ...) for each one it held.
_STORE = f"""fenced AS (
    DELETE FROM later_job_execution AS e USING v
    WHERE e.namespace = %(ns)s AND e.owner = %(owner)s AND e.job_id = v.job_id
      AND e.epoch = v.epoch
    RETURNING e.job_id
), held AS (
    SELECT v.* FROM v JOIN fenced USING (job_id)
), stored AS (
    UPDATE later_storage AS s SET value = COALESCE(held.value, s.value),
        date_expire = held.date_expire
    FROM held
    WHERE s.namespace = %(ns)s AND s.key = 'job:' || held.job_id
), indexed AS (
    UPDATE later_jobs_index AS i SET stage = held.stage, finished_at = held.finished_at,
        transitioned_at = %(now)s, run_at = held.run_at, date_expire = held.date_expire,
        attempts = i.attempts + held.attempts_delta, revision = i.revision + 1
    FROM held
    WHERE i.namespace = %(ns)s AND i.job_id = held.job_id
), dequeued AS (
    DELETE FROM later_delivery_queue AS d USING held
    WHERE d.namespace = %(ns)s AND d.job_id = held.job_id AND held.stage <> '{Stage.ENQUEUED}'
), requeued AS (
    UPDATE later_delivery_queue AS d SET lease_owner = NULL, available_at = %(now)s
    FROM held
    WHERE d.namespace = %(ns)s AND d.job_id = held.job_id AND held.stage = '{Stage.ENQUEUED}'
    RETURNING d.job_id
), woken AS (
    SELECT pg_notify('{NOTIFY_CHANNEL}', %(ns)s)
    FROM (SELECT 1 FROM requeued LIMIT 1) AS any_requeued
)
SELECT job_id, FALSE, (SELECT COUNT(*) FROM woken) FROM fenced"""

# In the transaction that also settles partition heads and children. The index rows
# are locked first, which reads a cancel request committed by a cancel that held a row;
# unless ``honoured``, a job with one is left out ("deferred") for honouring.honour.
PG_OUTCOMES = f"""
WITH given AS (
    SELECT * FROM {_GIVEN}
), locked AS MATERIALIZED (
    SELECT job_id, cancel_requested_at IS NOT NULL AS flagged FROM later_jobs_index
    WHERE namespace = %(ns)s AND job_id = ANY(%(job_ids)b::text[])
    ORDER BY job_id FOR NO KEY UPDATE
), deferred AS (
    SELECT job_id FROM locked WHERE flagged AND NOT %(honoured)s
), v AS (
    SELECT * FROM given WHERE job_id NOT IN (SELECT job_id FROM deferred)
), {_STORE}
UNION ALL SELECT job_id, TRUE, 0 FROM deferred
"""

# On its own, in autocommit: every job's index row is locked first (in id order,
# as a continuation's enqueue locks parents), which reads ``has_children`` and a
# cancel request as committed by any enqueue or cancel that held the row. A
# finished job with children, and any job with a cancel request, is left alone
# ("deferred") for the transaction that settles children and honours cancels.
PG_OUTCOMES_ALONE = f"""
WITH locked AS MATERIALIZED (
    SELECT job_id, has_children, cancel_requested_at IS NOT NULL AS flagged
    FROM later_jobs_index
    WHERE namespace = %(ns)s AND job_id = ANY(%(job_ids)b::text[])
    ORDER BY job_id FOR NO KEY UPDATE
), given AS (
    SELECT * FROM {_GIVEN}
), deferred AS (
    SELECT l.job_id FROM locked AS l JOIN given AS g USING (job_id)
    WHERE (l.has_children AND g.stage IN ({sql_list(FINISHED)})) OR l.flagged
), v AS (
    SELECT * FROM given WHERE job_id NOT IN (SELECT job_id FROM deferred)
), {_STORE}
UNION ALL SELECT job_id, TRUE, 0 FROM deferred
"""


def _params(namespace, owner, plans, now, expire_at, honoured=False) -> dict[str, object]:
    return {
        "ns": namespace,
        "owner": owner,
        "now": now,
        "job_ids": [o.job_id for o, *_ in plans],
        "epochs": [o.epoch for o, *_ in plans],
        "stages": [stage for _, stage, _, _ in plans],
        "values": [o.record.encode() if o.record else None for o, *_ in plans],
        "finished": [o.finished_at if t else None for o, _, _, t in plans],
        "run_at": [run_at for _, _, run_at, _ in plans],
        "expire": [expire_at if t else None for *_, t in plans],
        "attempts": [o.attempts_delta for o, *_ in plans],
        "honoured": honoured,
    }


def record_outcomes(
    cursor: Any,
    namespace: str,
    owner: str,
    plans: list,
    now: datetime,
    expire_at: datetime,
    honoured: bool,
) -> tuple[set[str], set[str]]:
    """Store the outcomes; unless ``honoured``, those with a cancel request come back
    unstored (flagged), their index rows locked."""
    return _store(cursor, PG_OUTCOMES, _params(namespace, owner, plans, now, expire_at, honoured))


def record_alone(
    cursor: Any,
    namespace: str,
    owner: str,
    plans: list,
    now: datetime,
    expire_at: datetime,
) -> tuple[set[str], set[str]]:
    return _store(cursor, PG_OUTCOMES_ALONE, _params(namespace, owner, plans, now, expire_at))


def _store(cursor: Any, statement: str, params: dict[str, object]) -> tuple[set[str], set[str]]:
    """Run an outcomes statement: the ids it stored, and those it left out ("deferred")."""
    cursor.execute(statement, params)
    stored: set[str] = set()
    deferred: set[str] = set()
    for job_id, is_deferred, _ in cursor.fetchall():
        (deferred if is_deferred else stored).add(job_id)
    return stored, deferred


# -- partition heads (topics) ----------------------------------------------------------

# Picking (``FOR UPDATE SKIP LOCKED``), leasing the partitions, taking the execution
# leases, pushing the heads' ``available_at`` and marking the jobs running.
PG_TAKE = f"""
WITH picked AS ({{pick}}),
runnable AS (
    SELECT * FROM picked WHERE stage IS NOT NULL AND stage NOT IN ({sql_list(FINISHED)})
), leased AS (
    INSERT INTO later_partition_lease (namespace, topic, "partition", owner, expires_at, epoch)
    SELECT %s, topic, "partition", %s, %s, 1 FROM runnable
    ON CONFLICT (namespace, topic, "partition") DO UPDATE SET owner = excluded.owner,
        expires_at = excluded.expires_at, epoch = later_partition_lease.epoch + 1
    RETURNING topic, "partition", epoch
), previous AS (
    SELECT job_id, owner FROM later_job_execution
    WHERE namespace = %s AND job_id IN (SELECT job_id FROM runnable)
), executed AS (
    INSERT INTO later_job_execution (namespace, job_id, owner, epoch, started_at, lease_expires_at)
    SELECT %s, r.job_id, %s, l.epoch, %s, %s
    FROM runnable r JOIN leased l USING (topic, "partition")
    ON CONFLICT (namespace, job_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch,
        started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at
), moved AS (
    UPDATE later_partition_head AS h SET available_at = %s FROM runnable r WHERE h.id = r.id
), marked AS (
    UPDATE later_jobs_index SET stage = '{Stage.RUNNING}', attempts = attempts + 1, started_at = %s,
        transitioned_at = %s, worker_id = %s, revision = revision + 1
    WHERE namespace = %s AND job_id IN (SELECT job_id FROM runnable)
)
SELECT p.id, p.topic, p."partition", p.sequence, p.job_id, p.available_at, p.stage,
       p.enqueued_at, l.epoch, pr.owner, {stored_record("p.job_id", "%s")} AS value
FROM picked p
LEFT JOIN leased l ON l.topic = p.topic AND l."partition" = p."partition"
LEFT JOIN previous pr ON pr.job_id = p.job_id
"""


# Lists travel as one array parameter each.
_PICK = partial(
    pick_heads,
    one_of=lambda values: ("= ANY(%s)", list(values)),
    none_of=lambda values: ("<> ALL(%s)", list(values)),
    lock=LOCK_HEAD + " SKIP LOCKED",
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
    """Pick, lease and start heads in one statement; ended heads come back untaken."""
    pick, pick_params = _PICK(cursor.db, namespace, now, room, preference, queues, running)
    ns = namespace
    params = [
        *pick_params,
        *(ns, owner, expires),  # leased
        ns,  # previous
        *(ns, owner, now, expires),  # executed
        expires,  # moved
        *(now, now, owner, ns),  # marked
        ns,  # the records
    ]
    cursor.execute(PG_TAKE.format(pick=pick), params)
    rows = cursor.fetchall()
    taken = [(r[:8], (r[4], r[7] or now, r[5], r[8], r[9], r[10])) for r in rows if r[8]]
    return rows, taken


def held_partitions(
    cursor: Any, namespace: str, places: list[tuple[str, int]]
) -> set[tuple[str, int]]:
    """A producer that has allocated a sequence number but not committed holds its
    partition's sequence row; its partition row is invisible here until it commits."""
    pairs = ", ".join(["(%s, %s)"] * len(places))
    cursor.execute(
        'SELECT topic, "partition" FROM later_partition_sequence WHERE namespace = %s '
        f'AND (topic, "partition") IN ({pairs}) ORDER BY topic, "partition" '
        "FOR UPDATE SKIP LOCKED",
        [namespace, *[v for place in places for v in place]],
    )
    free = set(cursor.fetchall())
    return {place for place in places if place not in free}


def next_rows(
    cursor: Any, namespace: str, places: list[tuple[str, int]], now: datetime
) -> list[tuple]:
    """One index probe per partition (a MIN over each partition scans its queued rows)."""
    cursor.execute(
        'SELECT p.topic, p."partition", n.sequence, n.job_id, GREATEST(n.available_at, %s) '
        f"FROM (VALUES {', '.join(['(%s::text, %s::int)'] * len(places))}) "
        'AS p(topic, "partition") CROSS JOIN LATERAL (SELECT sequence, job_id, available_at '
        "FROM later_partition_job j WHERE j.namespace = %s AND j.topic = p.topic "
        'AND j."partition" = p."partition" ORDER BY j.sequence LIMIT 1) AS n',
        [to_db(cursor.db, now), *[v for place in places for v in place], namespace],
    )
    return cursor.fetchall()


# Each head, then the rows below it through the (namespace, topic, partition,
# sequence) index: the cost follows the heads, never the queued rows. Left to
# itself, the planner expects the LIMIT to be met early in a scan of the rows and
# reads all of them when, as usual, none lies behind a head (375 ms a heartbeat at
# a million queued rows).
TRUNCATE = (
    "DELETE FROM later_partition_job WHERE id IN (SELECT j.id FROM later_partition_head h "
    "CROSS JOIN LATERAL (SELECT j.id FROM later_partition_job j WHERE "
    + SAME_PARTITION.format(a="j", b="h")
    + " AND j.sequence < h.sequence ORDER BY j.sequence LIMIT %(limit)s) j "
    "WHERE h.namespace = %(ns)s LIMIT %(limit)s)"
)


# -- upkeep ----------------------------------------------------------------------------


# The enqueue statements and the index's triggers append stage-count deltas
# (migration 0005) rather than lock the counter rows; upkeep folds them.
COUNT_DELTAS = True


def fold_counts(cursor: Any) -> None:
    """Move every pending stage-count delta into the totals."""
    cursor.execute(
        "WITH taken AS (DELETE FROM later_stage_count_delta "
        " RETURNING namespace, stage, delta) "
        "INSERT INTO later_stage_counts (namespace, stage, count) "
        "SELECT namespace, stage, SUM(delta) FROM taken GROUP BY namespace, stage "
        "ORDER BY namespace, stage "
        "ON CONFLICT (namespace, stage) "
        "DO UPDATE SET count = later_stage_counts.count + excluded.count"
    )


def lock_for_recount(cursor: Any, timeout_ms: int) -> None:
    """Block every writer of the index (and so every counter trigger) until the recount
    commits; locking only this table keeps the order writers use. While it waits, every
    new writer queues behind it, and a caller's open transaction that enqueued a job can
    hold it off for as long as that transaction lasts: so give up quickly
    (LockNotAvailable, transient) rather than stall the whole namespace."""
    cursor.execute(f"SET LOCAL lock_timeout = '{int(timeout_ms)}ms'")
    cursor.execute("LOCK TABLE later_jobs_index IN SHARE MODE")
    cursor.execute("SET LOCAL lock_timeout TO DEFAULT")


# Pages a table may add to the size its last ANALYZE saw before it counts as stale.
PAGE_SLACK = 16


def analyze_stale(cursor: Any, tables: Sequence[str], slack: int) -> list[str]:
    """Growth in rows or in pages. A table whose rows pass through it (the execution
    leases: one inserted at each claim, deleted at each outcome) keeps a handful of
    live rows while its dead ones fill pages until a vacuum. A plan made while it was
    empty scans all of them for every outcome, and a prepared statement keeps that
    plan until an ANALYZE records the pages (in drains of 20,000 jobs with autovacuum
    off, outcomes cost the server 105 to 130 µs a job instead of 70 to 85).
    ``SKIP_LOCKED`` passes over a table autovacuum is working on."""
    cursor.execute(
        "SELECT s.relname FROM pg_stat_user_tables s JOIN pg_class c ON c.oid = s.relid "
        "WHERE s.relname = ANY(%s) AND s.schemaname = current_schema() "
        "AND (c.reltuples < 0 OR s.n_live_tup > 2 * c.reltuples + %s "
        "     OR pg_relation_size(c.oid) / current_setting('block_size')::int "
        "        > 2 * c.relpages + %s) "
        "ORDER BY s.relname",
        [list(tables), slack, PAGE_SLACK],
    )
    stale = [row[0] for row in cursor.fetchall()]
    for table in stale:
        cursor.execute(f"ANALYZE (SKIP_LOCKED) {cursor.db.ops.quote_name(table)}")
    return stale
