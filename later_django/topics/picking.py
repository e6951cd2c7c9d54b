"""Picking runnable heads and taking their leases: the SQL behind claiming.

On PostgreSQL picking (``FOR UPDATE SKIP LOCKED``), leasing the partitions,
taking the execution leases, pushing the heads' ``available_at`` and marking
the jobs running is one statement; SQLite serialises writers, so there it is a
few statements in the claim's write transaction.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from ..db import is_postgres, placeholders, to_db
from ..states import FINISHED, Stage, sql_list


def pick_sql(connection, namespace, now, room, preference, queues, running) -> tuple[str, list]:
    """The statement that picks (and on PostgreSQL locks) up to ``room`` runnable heads."""
    pg = is_postgres(connection)
    params: list[Any] = [namespace, to_db(connection, now), to_db(connection, now)]
    extra, order = "", ""
    if queues:
        wanted = "= ANY(%s)" if pg else f"IN ({placeholders(len(queues))})"
        extra += (
            f" AND (j.queue_name IS NULL OR j.stage IN ({sql_list(FINISHED)}) "
            f"OR j.queue_name {wanted})"
        )
        params += [list(queues)] if pg else list(queues)
    if running and pg:  # one array parameter keeps the statement's text (and plan) stable
        extra += " AND h.job_id <> ALL(%s)"
        params.append(sorted(running))
    elif running:
        extra += f" AND h.job_id NOT IN ({placeholders(len(running))})"
        params += sorted(running)
    if not preference.everything:
        token = "(h.topic || ':' || h.\"partition\")"
        mine = f"{token} = ANY(%s)" if pg else f"{token} IN (SELECT value FROM json_each(%s))"
        tokens: Any = sorted(preference.tokens) if pg else json.dumps(sorted(preference.tokens))
        steal_before = now - timedelta(seconds=preference.steal_after)
        extra += f" AND ({mine} OR h.available_at <= %s)"
        params += [tokens, to_db(connection, steal_before)]
        order = f"CASE WHEN {mine} THEN 0 ELSE 1 END, "
        params_order: list[Any] = [tokens]
    else:
        params_order = []
    return (
        'SELECT h.id, h.topic, h."partition", h.sequence, h.job_id, h.available_at, j.stage, '
        "j.enqueued_at FROM later_partition_head h "
        "LEFT JOIN later_partition_lease l ON l.namespace = h.namespace AND l.topic = h.topic "
        'AND l."partition" = h."partition" '
        "LEFT JOIN later_jobs_index j ON j.namespace = h.namespace AND j.job_id = h.job_id "
        f"WHERE h.namespace = %s AND (h.available_at <= %s OR j.stage = '{Stage.CANCELLED}') "
        "AND (l.owner IS NULL OR l.expires_at IS NULL OR l.expires_at <= %s) "
        f"AND (j.stage IS NULL OR j.stage <> '{Stage.WAITING}'){extra} "
        f"ORDER BY {order}h.available_at, h.id LIMIT %s"
        + (" FOR UPDATE OF h SKIP LOCKED" if pg else ""),
        [*params, *params_order, room],
    )


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
       p.enqueued_at, l.epoch, pr.owner, s.value
FROM picked p
LEFT JOIN leased l ON l.topic = p.topic AND l."partition" = p."partition"
LEFT JOIN previous pr ON pr.job_id = p.job_id
LEFT JOIN later_storage s ON s.namespace = %s AND s.key = 'job:' || p.job_id
"""


def take_postgres(cursor, namespace, owner, now, expires, room, preference, queues, running):
    """Pick, lease and start heads in one statement; ended heads come back without an epoch."""
    sql, params = pick_sql(cursor.db, namespace, now, room, preference, queues, running)
    cursor.execute(
        PG_TAKE.format(pick=sql),
        [
            *params,
            namespace,
            owner,
            expires,
            namespace,
            namespace,
            owner,
            now,
            expires,
            expires,
            now,
            now,
            owner,
            namespace,
            namespace,
        ],
    )
    return cursor.fetchall()


def lease_sqlite(cursor, connection, namespace, owner, heads, now, expires) -> list[tuple]:
    """Take the partition and execution leases of ``heads`` and mark their jobs running."""
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
    marks = placeholders(len(ids))
    cursor.execute(
        "SELECT job_id, owner FROM later_job_execution "
        f"WHERE namespace = %s AND job_id IN ({marks})",
        [namespace, *ids],
    )
    previous = dict(cursor.fetchall())
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
    cursor.execute(
        f"UPDATE later_jobs_index SET stage = '{Stage.RUNNING}', attempts = attempts + 1, "
        "started_at = %s, transitioned_at = %s, worker_id = %s, revision = revision + 1 "
        f"WHERE namespace = %s AND job_id IN ({marks})",
        [stamp, stamp, owner, namespace, *ids],
    )
    cursor.execute(
        f"SELECT key, value FROM later_storage WHERE namespace = %s AND key IN ({marks})",
        [namespace, *[f"job:{i}" for i in ids]],
    )
    raw = {key[4:]: value for key, value in cursor.fetchall()}
    return [
        (
            h,
            (
                h[4],
                h[7] or now,
                h[5],
                epochs[(h[1], h[2])],
                previous.get(h[4]),
                raw.get(h[4]),
            ),
        )
        for h in heads
    ]
