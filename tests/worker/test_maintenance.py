"""Maintenance duties: promotion of due jobs, lease renewal, queue samples, exact counters."""

import logging
import signal
import threading
import time
from datetime import timedelta

import pytest
from django.db import OperationalError, connections, transaction
from django.utils import timezone

from later_django.engine.claiming import claim
from later_django.jobs import cancel_job
from later_django.models import (
    DeliveryCommand,
    JobExecution,
    JobIndexRow,
    QueueSample,
    StageCount,
    Worker,
)
from later_django.sql.postgres import PAGE_SLACK
from later_django.storage import is_transient
from later_django.tasks_api import TaskResultStatus
from later_django.worker import leases
from later_django.worker.config import WorkerConfig
from later_django.worker.maintenance import (
    HOT_TABLES,
    promote_due,
    reconcile_stage_counts,
    record_queue_sample,
    refresh_statistics,
)
from later_django.worker.runner import Worker as LaterWorker
from later_django.worker.services import RECONCILE_INTERVAL, Services
from tests import tasks
from tests.conftest import seconds_while_locked, wait_for
from tests.db_state import index_stage_counts, stage_counts
from tests.models import Execution
from tests.worker.in_process import worker_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

NS = "tests"


def test_a_delayed_job_runs_once_its_time_comes(start_worker):
    start_worker()
    # Its row is written before its first claim; a worker still starting up when the job
    # fell due (seconds, on a loaded machine) would run it late for that reason alone.
    wait_for(lambda: Worker.objects.filter(namespace=NS).exists(), timeout=20)
    before = time.time()
    result = tasks.record.using(run_after=timedelta(seconds=1)).enqueue("delayed", "x")
    assert JobIndexRow.objects.get(job_id=result.id).stage == "delayed"

    wait_for(lambda: JobIndexRow.objects.get(job_id=result.id).stage == "success", timeout=20)
    ran_at = Execution.objects.get(kind="delayed").at
    assert before + 1.0 <= ran_at < before + 2.5
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL


def test_promotion_queues_due_delayed_and_requeued_jobs_only():
    due = tasks.add.using(run_after=timedelta(seconds=10)).enqueue(1, 1).id
    retry = tasks.add.using(run_after=timedelta(seconds=20)).enqueue(2, 2).id
    JobIndexRow.objects.filter(job_id=retry).update(stage="requeued")
    not_yet = tasks.add.using(run_after=timedelta(minutes=5)).enqueue(3, 3).id

    assert promote_due(NS, using="default") == []
    promoted = promote_due(NS, using="default", now=timezone.now() + timedelta(seconds=30))

    assert sorted(promoted) == sorted([due, retry])
    assert set(DeliveryCommand.objects.values_list("job_id", flat=True)) == {due, retry}
    stages = dict(JobIndexRow.objects.values_list("job_id", "stage"))
    assert stages == {due: "enqueued", retry: "enqueued", not_yet: "delayed"}
    assert stage_counts(NS) == index_stage_counts(NS) == {"enqueued": 2, "delayed": 1}
    # Promoting again is harmless.
    assert promote_due(NS, using="default", now=timezone.now() + timedelta(seconds=30)) == []


def test_renewal_pushes_out_every_lease_the_worker_holds():
    tasks.add.enqueue_many([((i, i), {}) for i in range(2)])
    tasks.add.enqueue(9, 9)
    mine = [
        c.job_id for c in claim(NS, "me", queues=None, free=2, lease_seconds=1, using="default")
    ]
    mine += [
        c.job_id for c in claim(NS, "me", queues=None, free=2, lease_seconds=1, using="default")
    ]
    [theirs] = [
        c.job_id for c in claim(NS, "them", queues=None, free=1, lease_seconds=1, using="default")
    ]
    before = timezone.now()

    leases.renew(NS, "me", lease_seconds=60, using="default")

    for job_id in mine:
        assert JobExecution.objects.get(job_id=job_id).lease_expires_at > before + timedelta(
            seconds=59
        )
        assert DeliveryCommand.objects.get(job_id=job_id).available_at > before + timedelta(
            seconds=59
        )
    assert JobExecution.objects.get(job_id=theirs).lease_expires_at < before + timedelta(seconds=2)


def test_renewal_skips_a_lease_locked_by_an_outcome_in_progress_instead_of_waiting(vendor):
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite has one writer at a time")
    tasks.add.enqueue_many([((i, i), {}) for i in range(3)])
    mine = []
    for _ in range(3):
        mine += [
            c.job_id for c in claim(NS, "me", queues=None, free=1, lease_seconds=1, using="default")
        ]
    busy = mine[0]
    before = timezone.now()
    waited = seconds_while_locked(
        [JobExecution.objects.filter(job_id=busy), DeliveryCommand.objects.filter(job_id=busy)],
        lambda: leases.renew(NS, "me", lease_seconds=60, using="default"),
    )

    # Waiting for the row could deadlock with the outcome that holds it.
    assert waited < 5
    renewed = set(
        JobExecution.objects.filter(
            lease_expires_at__gt=before + timedelta(seconds=59)
        ).values_list("job_id", flat=True)
    )
    assert renewed == set(mine[1:])
    commands = DeliveryCommand.objects.filter(available_at__gt=before + timedelta(seconds=59))
    assert set(commands.values_list("job_id", flat=True)) == set(mine[1:])


def test_a_running_worker_heartbeats_and_removes_its_row_when_it_stops(start_worker):
    worker = start_worker("--concurrency", "3", "--queue", "emails")
    wait_for(lambda: Worker.objects.filter(namespace=NS).exists(), timeout=20)
    row = Worker.objects.get(namespace=NS)
    assert (row.pid, row.concurrency) == (worker.pid, 3)
    first_beat = row.heartbeat_at
    wait_for(
        lambda: Worker.objects.get(namespace=NS).heartbeat_at > first_beat,
        timeout=5,
    )
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
    assert not Worker.objects.exists()


def test_one_queue_sample_per_minute_is_kept():
    tasks.add.enqueue_many([((i, i), {}) for i in range(3)])
    minute = timezone.now().replace(second=0, microsecond=0)

    record_queue_sample(NS, using="default", now=minute + timedelta(seconds=5))
    tasks.add.enqueue(1, 1)
    record_queue_sample(NS, using="default", now=minute + timedelta(seconds=50))
    record_queue_sample(NS, using="default", now=minute + timedelta(seconds=65))

    samples = list(QueueSample.objects.order_by("minute").values_list("minute", "queued"))
    assert samples == [(minute, 4), (minute + timedelta(minutes=1), 4)]


def test_a_starting_worker_records_the_queue_length_of_the_current_minute():
    tasks.add.using(run_after=timedelta(hours=1)).enqueue(1, 1)
    tasks.add.using(queue_name="slow").enqueue_many([((i, i), {}) for i in range(2)])
    with worker_thread(queues=["default"]):
        wait_for(lambda: QueueSample.objects.exists(), timeout=10)
    sample = QueueSample.objects.get()
    assert sample.namespace == NS
    assert sample.queued == 2
    assert timezone.now() - sample.minute < timedelta(minutes=2)


def test_stage_counters_match_the_job_index_after_a_mixed_workload(run_burst):
    tasks.record.enqueue_many([(("mixed", str(i)), {}) for i in range(10)])
    tasks.always_fails.enqueue_many([(("boom",), {}) for _ in range(3)])
    tasks.fails_and_retries_in_a_minute.enqueue("mixed-retry")
    tasks.add.using(run_after=timedelta(hours=1)).enqueue_many([((i, i), {}) for i in range(4)])
    tasks.record.using(queue_name="slow").enqueue_many([(("left", str(i)), {}) for i in range(5)])
    cancelled = tasks.add.using(run_after=timedelta(hours=2)).enqueue(0, 0)
    cancel_job(cancelled.id, namespace=NS)
    run_burst("--queue", "default")
    # A job claimed by a worker that is still running it.
    claim(NS, "elsewhere", queues=["slow"], free=1, lease_seconds=60, using="default")

    expected = {
        "success": 10,
        "failed": 3,
        "requeued": 1,
        "delayed": 4,
        "enqueued": 4,
        "running": 1,
        "cancelled": 1,
    }
    assert index_stage_counts(NS) == expected
    assert stage_counts(NS) == expected
    # A recount finds nothing to correct.
    assert reconcile_stage_counts(NS, using="default") == expected
    assert stage_counts(NS) == expected


def test_reconciliation_repairs_counters_that_drifted():
    tasks.add.enqueue_many([((i, i), {}) for i in range(3)])
    StageCount.objects.filter(namespace=NS, stage="enqueued").update(count=99)
    StageCount.objects.create(namespace=NS, stage="running", count=-4)

    assert reconcile_stage_counts(NS, using="default") == {"enqueued": 3}
    assert stage_counts(NS) == {"enqueued": 3}


def test_a_recount_gives_up_quickly_rather_than_queue_writers_behind_an_open_transaction(vendor):
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite's single writer waits in its busy timeout")
    outcome: dict[str, object] = {}

    def recount():
        started = time.monotonic()
        try:
            reconcile_stage_counts(NS, using="default")
        except OperationalError as e:
            outcome["error"] = e
        finally:
            outcome["seconds"] = time.monotonic() - started
            connections.close_all()

    with transaction.atomic():
        tasks.add.enqueue(1, 1)  # holds later_jobs_index in ROW EXCLUSIVE until commit
        thread = threading.Thread(target=recount)
        thread.start()
        thread.join(10)
    assert outcome["seconds"] < 1.0
    assert "canceling statement due to lock timeout" in str(outcome["error"])
    assert is_transient(outcome["error"])  # so the worker tries again later


def test_a_worker_postpones_a_recount_it_cannot_lock_and_tries_again_later(vendor, caplog):
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    caplog.set_level(logging.INFO, logger="later_django.worker.services")
    services = Services(LaterWorker(WorkerConfig(install_signal_handlers=False)))
    seconds: list[float] = []

    def recount():
        started = time.monotonic()
        try:
            services.reconcile()
        finally:
            seconds.append(time.monotonic() - started)
            connections.close_all()

    with transaction.atomic():
        tasks.add.enqueue(1, 1)
        thread = threading.Thread(target=recount)
        thread.start()
        thread.join(10)
    assert seconds[0] < 1.0
    assert "stage count recount postponed 60.0s namespace=tests" in caplog.text
    assert not services.due("reconcile", RECONCILE_INTERVAL)
    services.last["reconcile"] -= 60
    assert services.due("reconcile", RECONCILE_INTERVAL)


@pytest.fixture
def without_autovacuum(vendor):
    """Keep autovacuum off the hot tables for the test: its own ANALYZE, whenever it came,
    would replace the planner statistics the test sets up."""
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    with connections["default"].cursor() as cursor:
        for table in HOT_TABLES:
            cursor.execute(f"ALTER TABLE {table} SET (autovacuum_enabled = false)")
    yield
    with connections["default"].cursor() as cursor:
        for table in HOT_TABLES:
            cursor.execute(f"ALTER TABLE {table} RESET (autovacuum_enabled)")


def test_a_queue_filled_since_its_last_analyze_gets_fresh_planner_statistics(without_autovacuum):
    with connections["default"].cursor() as cursor:
        cursor.execute("ANALYZE later_delivery_queue, later_storage")  # analysed while empty
    assert "later_delivery_queue" not in refresh_statistics(using="default")
    tasks.add.enqueue_many([((i, i), {}) for i in range(1500)])
    wait_for(lambda: queue_statistics() == (1500, 1500), timeout=10)
    refreshed = refresh_statistics(using="default")
    assert "later_delivery_queue" in refreshed
    assert "later_storage" in refreshed  # the jobs' records, read by every claim
    assert planned_rows("later_delivery_queue") == {"later_delivery_queue": 1500}
    assert "later_delivery_queue" not in refresh_statistics(using="default")


def planned_rows(*tables: str) -> dict[str, float]:
    """The rows the planner believes each of ``tables`` holds (as of its last ANALYZE)."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT relname, reltuples FROM pg_class WHERE relname = ANY(%s)", [list(tables)]
        )
        return dict(cursor.fetchall())


def table_statistics(table: str, columns: str) -> tuple:
    """``columns`` of ``pg_stat_user_tables`` for ``table``, as the server reports them
    once this connection's own counts are sent."""
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")
    with connections["default"].cursor() as cursor:  # a new transaction sees the flush
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(f"SELECT {columns} FROM pg_stat_user_tables WHERE relname = %s", [table])
        return cursor.fetchone()


def queue_statistics() -> tuple[int, int]:
    """The delivery queue's live rows, and rows changed since its last ANALYZE."""
    return table_statistics("later_delivery_queue", "n_live_tup, n_mod_since_analyze")


def test_a_worker_refreshes_stale_planner_statistics_before_it_claims(without_autovacuum):
    """A backlog enqueued just before a worker starts is planned as the backlog it is
    from the first claim, not from the maintenance thread's first turn."""
    with connections["default"].cursor() as cursor:
        cursor.execute("ANALYZE later_delivery_queue, later_storage")  # analysed while empty
    tasks.add.enqueue_many([((i, i), {}) for i in range(1500)])
    wait_for(lambda: queue_statistics()[0] == 1500, timeout=10)
    services = Services(LaterWorker(WorkerConfig(install_signal_handlers=False)))
    services.start()  # what Worker.run does before its first claim
    try:
        assert planned_rows("later_delivery_queue", "later_storage") == {
            "later_delivery_queue": 1500,
            "later_storage": 1500,
        }
    finally:
        services.stop()


def test_a_queue_that_keeps_its_size_keeps_its_planner_statistics(without_autovacuum):
    """Rows passing through a queue of steady size change no plan: no ANALYZE for them."""
    tasks.add.enqueue_many([((i, i), {}) for i in range(1500)])
    wait_for(lambda: queue_statistics() == (1500, 1500), timeout=10)  # counted before ANALYZE
    with connections["default"].cursor() as cursor:
        cursor.execute("ANALYZE later_delivery_queue")
        cursor.execute("DELETE FROM later_delivery_queue")
    tasks.add.enqueue_many([((i, i), {}) for i in range(1500)])
    wait_for(lambda: queue_statistics() == (1500, 3000), timeout=10)
    assert "later_delivery_queue" not in refresh_statistics(using="default")
    tasks.add.enqueue_many([((i, i), {}) for i in range(3000)])  # 4,500: past 2 x 1,500 + 1,000
    wait_for(lambda: queue_statistics()[0] == 4500, timeout=10)
    assert "later_delivery_queue" in refresh_statistics(using="default")


def churn_execution_leases(leases: int) -> None:
    """Claim-and-finish churn: each lease inserted, then deleted, as outcomes do."""
    now = timezone.now()
    JobExecution.objects.bulk_create(
        JobExecution(
            namespace=NS,
            job_id=f"{n:026d}",
            owner="w1",
            epoch=1,
            started_at=now,
            lease_expires_at=now + timedelta(minutes=5),
        )
        for n in range(leases)
    )
    JobExecution.objects.filter(namespace=NS).delete()


def planned_pages(table: str) -> tuple[int, int]:
    """The pages the planner believes ``table`` has (as of its last ANALYZE), and its pages."""
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT relpages, pg_relation_size(oid) / current_setting('block_size')::int "
            "FROM pg_class WHERE relname = %s",
            [table],
        )
        return cursor.fetchone()


def test_execution_leases_that_came_and_went_get_fresh_planner_statistics(without_autovacuum):
    """Leases pass through: their table keeps a handful of live rows while the deleted
    ones fill its pages until a vacuum. An outcome's prepared statement, planned while
    the table was empty (as every worker's first outcome finds it), kept a scan of
    every dead lease until an ANALYZE recorded the pages. The refresh counts pages as
    well as rows."""
    with connections["default"].cursor() as cursor:
        cursor.execute("ANALYZE later_job_execution")  # analysed while empty
    assert "later_job_execution" not in refresh_statistics(using="default")
    churn_execution_leases(6000)
    assert table_statistics("later_job_execution", "n_live_tup") == (0,)
    planned, pages = planned_pages("later_job_execution")
    assert pages > 2 * planned + PAGE_SLACK  # stale by pages alone
    assert "later_job_execution" in refresh_statistics(using="default")
    assert planned_pages("later_job_execution") == (pages, pages)
    assert "later_job_execution" not in refresh_statistics(using="default")


def storage_rows_fetched() -> int:
    """Rows of ``later_storage`` this database's index scans have fetched so far."""
    return table_statistics("later_storage", "COALESCE(idx_tup_fetch, 0)")[0]


def test_a_claim_reads_only_its_own_records_while_storage_statistics_are_stale(without_autovacuum):
    """Analysed while empty, ``later_storage`` looks like a handful of rows to the
    planner, which then joined a claim to every record of the namespace."""
    with connections["default"].cursor() as cursor:
        cursor.execute("ANALYZE later_storage")
    tasks.add.enqueue_many([((i, i), {}) for i in range(1500)])
    with connections["default"].cursor() as cursor:  # as the worker's refresh leaves them
        cursor.execute("ANALYZE later_delivery_queue, later_jobs_index, later_job_execution")
    for _ in range(3):
        before = storage_rows_fetched()
        claimed = claim(NS, "w1", queues=None, free=8, lease_seconds=30.0, using="default")
        assert len(claimed) == 8
        assert all(item.record is not None for item in claimed)
        assert storage_rows_fetched() - before <= 8


def test_refreshing_statistics_is_a_no_op_on_sqlite(vendor):
    if vendor != "sqlite":
        pytest.skip("SQLite only")
    tasks.add.enqueue_many([((i, i), {}) for i in range(10)])
    assert refresh_statistics(using="default") == []
