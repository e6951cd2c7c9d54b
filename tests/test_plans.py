"""The statements every worker runs at each heartbeat read through indexes, never a whole queue.

A backlog of a million waiting jobs must not cost each worker a full scan
every few seconds (see bench/upkeep.py for the figures). Each test fills a
table with waiting rows, lets the database gather statistics, runs the real
duty, and asks the database for the plan of the statement it ran.
"""

from collections.abc import Callable
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from later_django.counts import oldest_in_stage
from later_django.dashboard import listing
from later_django.dashboard.scope import Scope
from later_django.models import (
    DeliveryCommand,
    JobExecution,
    JobIndexRow,
    PartitionHead,
    PartitionJob,
)
from later_django.sql import postgres
from later_django.states import Stage
from later_django.topics import history, upkeep
from later_django.worker import leases
from tests import tasks

pytestmark = pytest.mark.django_db(transaction=True)

OWNER = "host:1:abcdef"


def plan_of(duty: Callable[[], object], table: str) -> str:
    """Run ``duty``; return the plan of the one statement it ran on ``table``."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    with CaptureQueriesContext(connection) as captured:
        duty()
    [statement] = [q["sql"] for q in captured if table in q["sql"]]
    explain = "EXPLAIN " if connection.vendor == "postgresql" else "EXPLAIN QUERY PLAN "
    with connection.cursor() as cursor:
        cursor.execute(explain + statement)
        return "\n".join(str(row) for row in cursor.fetchall())


def waiting_commands(now, *, priorities: int = 1, spread: bool = False) -> None:
    """5,000 delivery commands, the first 16 claimed by OWNER."""
    DeliveryCommand.objects.bulk_create(
        DeliveryCommand(
            namespace="tests",
            queue_name="default",
            job_id=f"{n:026d}",
            priority=n % priorities,
            available_at=now - timedelta(seconds=n if spread else 0),
            enqueued_at=now,
            lease_owner=OWNER if n < 16 else None,
        )
        for n in range(5000)
    )


def test_lease_renewal_reads_claimed_commands_through_the_owner_index():
    now = timezone.now()
    waiting_commands(now)

    plan = plan_of(
        lambda: leases.renew("tests", OWNER, lease_seconds=30, using="default"),
        "later_delivery_queue",
    )

    assert "later_delivery_owner_idx" in plan, plan
    assert DeliveryCommand.objects.filter(lease_owner=OWNER, available_at__gt=now).count() == 16


def test_truncation_reads_only_the_rows_below_each_head():
    now = timezone.now()
    PartitionJob.objects.bulk_create(
        PartitionJob(
            namespace="tests",
            topic="orders",
            partition=n % 4,
            sequence=n // 4 + 1,
            job_id=f"{n:026d}",
            available_at=now,
        )
        for n in range(5000)
    )
    PartitionHead.objects.bulk_create(
        PartitionHead(
            namespace="tests",
            topic="orders",
            partition=p,
            sequence=1,
            job_id=f"{p:026d}",
            available_at=now,
        )
        for p in range(4)
    )

    plan = plan_of(lambda: upkeep.truncate("tests", using="default"), "later_partition_job")

    # The rows are found below each head through the unique (…, sequence) index
    # (the DELETE around it may then match their ids any way it likes).
    if connection.vendor == "postgresql":
        assert "Index Scan on later_partjob_seq_uniq" in plan or (
            "Index Scan using later_partjob_seq_uniq on later_partition_job j" in plan
        ), plan
        assert "Seq Scan on later_partition_job j" not in plan, plan
    else:
        assert "SEARCH j USING" in plan, plan
        assert "SCAN j" not in plan, plan
    assert PartitionJob.objects.count() == 5000  # nothing lay behind a head


def test_history_trim_skips_the_kept_rows_through_the_finished_jobs_index():
    now = timezone.now()
    JobIndexRow.objects.bulk_create(
        JobIndexRow(
            namespace="tests",
            job_id=f"{n:026d}",
            task_path="shop.tasks.step",
            queue_name="default",
            stage="success" if n < 2000 else "enqueued",
            enqueued_at=now,
            transitioned_at=now,
            topic="orders",
            partition=n % 4,
            sequence=n // 4 + 1,
        )
        for n in range(10000)
    )

    plan = plan_of(
        lambda: history.trim_partition(
            "tests", "orders", 1, keep_last=100, batch=50, using="default"
        ),
        "later_jobs_index",
    )

    # The queued rows (newest sequences) are not in the index, so skipping the kept
    # finished rows never walks past them.
    if connection.vendor == "postgresql":
        assert "later_jobsindex_done_idx" in plan, plan
        assert "Seq Scan on later_jobs_index" not in plan, plan
    else:
        assert "USING INDEX later_jobsindex_done_idx" in plan or (
            "USING COVERING INDEX later_jobsindex_done_idx" in plan
        ), plan
        assert "SCAN later_jobs_index\n" not in plan + "\n", plan
    assert JobIndexRow.objects.filter(partition=1, stage="success").count() == 500 - 50


class StatementOnly:
    """Takes the statement a dialect function would run, and runs nothing (its plan is
    then read from the database)."""

    def execute(self, sql: str, params: object) -> None:
        self.sql, self.params = sql, params

    def fetchall(self) -> list:
        return []


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="SQLite reads the holders by an IN list of ids"
)
def test_a_claim_reads_no_execution_lease_to_find_a_lost_attempts_worker():
    """Who held a claimed job before (the worker of an attempt lost when its lease lapsed)
    is the command's own ``lease_owner``. The claim read it from the execution leases,
    and with many jobs running on other workers, and statistics taken while few were,
    that read every lease of the namespace: a claim of 48 jobs among 14,400 leases took
    93 ms, 72 of them in that read."""
    tasks.add.enqueue_many([((n, 0), {}) for n in range(48)])
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")  # as autovacuum last saw the tables: no job running
    now = timezone.now()
    JobExecution.objects.bulk_create(
        JobExecution(
            namespace="tests",
            job_id=f"{n:026d}",
            owner=f"elsewhere:{n % 50}",
            epoch=1,
            started_at=now,
            lease_expires_at=now + timedelta(minutes=5),
        )
        for n in range(20000)
    )
    statement = StatementOnly()
    postgres.claim(statement, "tests", OWNER, None, now, now + timedelta(seconds=30), 48)
    with connection.cursor() as cursor:
        # The claim writes, so its plan is read from a run that is rolled back.
        cursor.execute("BEGIN")
        try:
            cursor.execute("EXPLAIN (ANALYZE, COSTS OFF) " + statement.sql, statement.params)
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("ROLLBACK")

    assert "Scan on later_job_execution" not in plan, plan
    assert "Index Scan using later_execution" not in plan, plan
    assert "Insert on later_job_execution" in plan, plan  # the plan read is the claim's


def listing_index_size() -> dict[str, int]:
    """The size of the job index's two listing indexes: PostgreSQL's pages, SQLite's entries."""
    names = ["later_jobsindex_stage_idx", "later_jobsindex_task_idx"]
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT relname, pg_relation_size(oid) / current_setting('block_size')::int "
                "FROM pg_class WHERE relname IN (%s, %s)",
                names,
            )
        else:
            cursor.execute(
                "SELECT name, sum(ncell) FROM dbstat "
                "WHERE name IN (%s, %s) AND pagetype = 'leaf' GROUP BY name",
                names,
            )
        return dict.fromkeys(names, 0) | dict(cursor.fetchall())


def test_a_queued_job_without_a_topic_writes_no_entry_in_the_listing_indexes():
    before = listing_index_size()
    tasks.add.enqueue_many([((n, n), {}) for n in range(2000)])
    for n in range(20):
        tasks.add.enqueue(n, n)
    assert listing_index_size() == before
    # The measure sees entries: the same number of jobs in another stage adds them.
    JobIndexRow.objects.filter(namespace="tests").update(stage="failed")
    grown = listing_index_size()
    assert all(grown[name] > before[name] for name in before), (before, grown)


def test_the_enqueued_page_and_the_oldest_queued_job_read_the_queue_in_index_order():
    now = timezone.now()
    waiting_commands(now, priorities=3, spread=True)
    scope = Scope(namespace="tests", database="default", choices=("tests",))

    for read in (
        lambda: oldest_in_stage("tests", Stage.ENQUEUED),
        lambda: listing.queued_jobs(scope, now),
    ):
        plan = plan_of(read, "later_delivery_queue")
        # Walked in an index's order (SQLite's rowid is the primary key) and stopped
        # early: no scan of the whole queue, nothing sorted.
        if connection.vendor == "postgresql":
            assert "Seq Scan" not in plan, plan
            assert "Sort" not in plan, plan
        else:
            assert "TEMP B-TREE" not in plan, plan
