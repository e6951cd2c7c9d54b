"""The enqueue write path: a job's record, its index row and its queue command.

Everything goes through the caller's connection, so inside
``transaction.atomic()`` the job commits or rolls back with the caller's data.
On PostgreSQL any number of jobs is one statement (three inserts in one CTE,
over arrays for many jobs); on SQLite, three ``executemany`` calls in one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..db import connection_for, is_postgres, one_statement, to_db, write_transaction
from ..records import JobRecord, job_key
from ..states import Stage


@dataclass
class NewJob:
    record: JobRecord
    stage: Stage  # as created (states.TRANSITIONS[None]), or cancelled at once
    run_at: datetime
    enqueued_at: datetime


INDEX_COLUMNS = (
    "namespace, job_id, task_path, queue_name, priority, stage, revision, attempts, "
    "enqueued_at, run_at, transitioned_at, topic, partition, sequence, parent_job_id"
)

# The arrays travel in binary (%b): the text format quotes and escapes every
# element in Python, which cost more than building the jobs.
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
)
INSERT INTO later_delivery_queue (namespace, queue_name, job_id, priority, available_at,
                                  enqueued_at)
SELECT %s, queue_name, job_id, priority, run_at, enqueued_at FROM job
WHERE stage = '{Stage.ENQUEUED}' AND topic IS NULL
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
)
INSERT INTO later_delivery_queue (namespace, queue_name, job_id, priority, available_at,
                                  enqueued_at)
SELECT %(ns)s, %(queue)s, %(id)s, %(priority)s, %(run_at)s, %(enqueued_at)s
WHERE %(stage)s = '{Stage.ENQUEUED}' AND %(topic)s::text IS NULL
"""


def insert_jobs(namespace: str, jobs: Sequence[NewJob], *, using: str) -> None:
    """Write new jobs in the caller's transaction (or a transaction of their own)."""
    if not jobs:
        return
    connection = connection_for(using)
    if is_postgres(connection):
        with one_statement(using) as cursor:
            _insert_postgres(cursor, namespace, jobs)
        return
    with write_transaction(using, savepoint=False, hot=True) as cursor:
        cursor.executemany(
            "INSERT INTO later_storage (namespace, key, value) VALUES (%s, %s, %s)",
            [(namespace, job_key(j.record.id), j.record.encode()) for j in jobs],
        )
        cursor.executemany(
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
                    to_db(connection, j.enqueued_at),
                    to_db(connection, j.run_at),
                    to_db(connection, j.enqueued_at),
                    j.record.topic,
                    j.record.partition,
                    j.record.sequence,
                    j.record.parent_id,
                )
                for j in jobs
            ],
        )
        queued = [j for j in jobs if j.stage == Stage.ENQUEUED and j.record.topic is None]
        if queued:
            cursor.executemany(
                "INSERT INTO later_delivery_queue "
                "(namespace, queue_name, job_id, priority, available_at, enqueued_at) "
                "VALUES (%s, %s, %s, %s, %s, %s)",
                [
                    (
                        namespace,
                        j.record.queue_name,
                        j.record.id,
                        j.record.priority,
                        to_db(connection, j.run_at),
                        to_db(connection, j.enqueued_at),
                    )
                    for j in queued
                ],
            )


def _insert_postgres(cursor: Any, namespace: str, jobs: Sequence[NewJob]) -> None:
    if len(jobs) == 1:
        job = jobs[0]
        cursor.execute(
            PG_INSERT_ONE,
            {
                "ns": namespace,
                "id": job.record.id,
                "value": job.record.encode(),
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
    cursor.execute(
        PG_INSERT,
        [
            [j.record.id for j in jobs],
            [j.record.encode() for j in jobs],
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
        ],
    )
