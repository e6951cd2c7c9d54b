"""The producer side of topics: route a job to its partition and give it a sequence number.

Everything happens in the caller's transaction, before the job's own rows are
written: the partition's next sequence number is allocated with an upsert that
holds the partition's sequence row until the transaction ends (so concurrent
producers of one partition commit in sequence order), the job's
``later_partition_job`` row is inserted, and the partition's head is created if
the partition had none.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..db import (
    connection_for,
    placeholders,
    to_db,
    write_transaction,
)
from ..exceptions import InvalidArgument, PayloadDecodeError, TopicLayoutMismatch
from ..records import JobRecord
from ..sql import dialect
from .registry import check_layout, partition_count
from .routing import partition_for_key

if TYPE_CHECKING:
    from ..engine.enqueue import NewJob
    from ..options import BackendOptions
    from ..tasks_api import Task

ROWS_PER_STATEMENT = 1000


def route_fields(later: BackendOptions, task: Task) -> dict[str, Any]:
    """The record fields that place an ordered task's job in its partition ({} otherwise).

    Raises InvalidArgument when an ordered task is enqueued without a key and
    UnknownTopic when its topic is not declared.
    """
    topic = getattr(task, "topic", None)
    if topic is None:
        return {}
    key = getattr(task, "partition_key", None)
    if key is None:
        raise InvalidArgument(
            f"partition_key is None for task {task.module_path!r}, which is ordered by topic "
            f"{topic!r}; name the key of every enqueue: task.using(partition_key=...).enqueue()."
        )
    count = partition_count(later, topic)
    return {"topic": topic, "partition_key": key, "partition": partition_for_key(key, count)}


def insert_with_partitions(
    later: BackendOptions, jobs: Sequence[NewJob], insert: Callable[[Sequence[NewJob]], None]
) -> None:
    """Run ``insert(jobs)``, first placing the ordered ones in their partitions, atomically.

    Continuations whose task names no topic inherit their parent's partition.
    """
    # A malformed parent id is left for the continuation path to refuse.
    orphans = [j for j in jobs if isinstance(j.record.parent_id, str) and j.record.topic is None]
    if not orphans and all(job.record.topic is None for job in jobs):
        insert(jobs)
        return
    with write_transaction(later.database) as cursor:
        if orphans:
            _inherit_partitions(cursor, later.namespace, orphans)
        ordered = [job for job in jobs if job.record.topic is not None]
        refused = _check_layouts(cursor, later, ordered)
        if refused is None:
            if ordered:
                place(cursor, later, ordered)
            insert(jobs)
    if refused is not None:
        # Raised outside the write block, which may be the caller's own transaction:
        # a refusal must leave it usable.
        raise refused


def _inherit_partitions(cursor: Any, namespace: str, jobs: Sequence[NewJob]) -> None:
    """Put continuations of partitioned parents in their parents' partitions.

    A child whose own task names no topic runs in its parent's partition,
    after it: it waits there as head once its parent has finished, so the rows
    behind it wait too until it has run.
    """
    parents = sorted({job.record.parent_id for job in jobs if job.record.parent_id})
    cursor.execute(
        'SELECT i.job_id, i.topic, i."partition", s.value FROM later_jobs_index i '
        "LEFT JOIN later_storage s ON s.namespace = i.namespace AND s.key = 'job:' || i.job_id "
        f"WHERE i.namespace = %s AND i.job_id IN ({placeholders(len(parents))}) "
        "AND i.topic IS NOT NULL",
        [namespace, *parents],
    )
    places = {}
    for job_id, topic, partition, raw in cursor.fetchall():
        key = None
        if raw is not None:
            try:
                key = JobRecord.decode(bytes(raw), job_id=job_id).partition_key
            except PayloadDecodeError:
                key = None  # the routing is in the index row; the key is only informative
        places[job_id] = (topic, partition, key)
    for job in jobs:
        place = places.get(job.record.parent_id or "")
        if place is not None:
            job.record.topic, job.record.partition, job.record.partition_key = place


def _check_layouts(
    cursor: Any, later: BackendOptions, jobs: Sequence[NewJob]
) -> TopicLayoutMismatch | None:
    for topic in sorted({job.record.topic for job in jobs if job.record.topic is not None}):
        refused = check_layout(cursor, later, topic, partition_count(later, topic))
        if refused is not None:
            return refused
    return None


def place(cursor: Any, later: BackendOptions, jobs: Sequence[NewJob]) -> None:
    """Allocate sequence numbers and write partition rows and missing heads for ``jobs``.

    The caller has checked the topics' layouts in this transaction.
    """
    connection = connection_for(later.database)
    namespace = later.namespace
    groups: dict[tuple[str, int], list[NewJob]] = defaultdict(list)
    for job in jobs:
        topic, partition = job.record.topic, job.record.partition
        assert topic is not None
        assert partition is not None
        groups[(topic, partition)].append(job)
    # Sorted, so two producers that share partitions lock their sequence rows in one order.
    order = sorted(groups)
    cursor.execute(
        'INSERT INTO later_partition_sequence (namespace, topic, "partition", next_sequence) '
        "VALUES "
        + ", ".join(["(%s, %s, %s, %s)"] * len(order))
        + ' ON CONFLICT (namespace, topic, "partition") DO UPDATE SET next_sequence = '
        "later_partition_sequence.next_sequence + excluded.next_sequence - 1 "
        'RETURNING topic, "partition", next_sequence',
        [v for t, p in order for v in (namespace, t, p, len(groups[(t, p)]) + 1)],
    )
    for topic, partition, next_sequence in cursor.fetchall():
        group = groups[(topic, partition)]
        first = next_sequence - len(group)
        for offset, job in enumerate(group):
            job.record.sequence = first + offset
    rows = [
        (
            namespace,
            topic,
            partition,
            job.record.sequence,
            job.record.id,
            to_db(connection, job.run_at),
        )
        for topic, partition in order
        for job in groups[(topic, partition)]
    ]
    for start in range(0, len(rows), ROWS_PER_STATEMENT):
        chunk = rows[start : start + ROWS_PER_STATEMENT]
        cursor.execute(
            "INSERT INTO later_partition_job "
            '(namespace, topic, "partition", sequence, job_id, available_at) VALUES '
            + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk)),
            [v for row in chunk for v in row],
        )
    # A partition that already has a head keeps it: its head has a lower sequence.
    heads = [row for row in rows if row[3] == groups[(row[1], row[2])][0].record.sequence]
    cursor.execute(
        "INSERT INTO later_partition_head "
        '(namespace, topic, "partition", sequence, job_id, available_at) VALUES '
        + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(heads))
        + ' ON CONFLICT (namespace, topic, "partition") DO NOTHING',
        [v for row in heads for v in row],
    )
    dialect(connection).notify_queued(cursor, namespace)


def requeue_in_partition(later: BackendOptions, job: NewJob) -> None:
    """Put an ended ordered job back at the tail of its partition, for a manual retry.

    Its partition has moved on, so it gets a new sequence number (set on
    ``job.record`` and on its index row) and runs after everything queued
    there now; it gets no delivery-queue command. Runs in the caller's
    transaction; the caller stores the record afterwards.
    """
    with write_transaction(later.database) as cursor:
        place(cursor, later, [job])
        cursor.execute(
            "UPDATE later_jobs_index SET sequence = %s WHERE namespace = %s AND job_id = %s",
            [job.record.sequence, later.namespace, job.record.id],
        )
