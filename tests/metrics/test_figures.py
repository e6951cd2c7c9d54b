"""Each metric matches what the database holds, after real workers did the work."""

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Count, Sum
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from later_django.dashboard.overview import floor_minute, percentile
from later_django.log import Consumer, append_many
from later_django.models import (
    DeliveryCommand,
    JobExecution,
    JobIndexRow,
    JobTransitionMetric,
    JobWaitMetric,
    PartitionJob,
    Worker,
)
from later_django.states import Stage
from tests import tasks
from tests.conftest import wait_for
from tests.topics import tasks as topic_tasks
from tests.topics.helpers import keys_in_distinct_partitions

from .conftest import value

pytestmark = pytest.mark.django_db(transaction=True)


def stages_in_database(namespace: str = "tests") -> dict[str, int]:
    rows = JobIndexRow.objects.filter(namespace=namespace).values("stage").annotate(n=Count("id"))
    return {row["stage"]: row["n"] for row in rows}


def test_job_counts_transitions_and_waits_match_the_tables_after_a_real_worker(run_burst, scrape):
    for n in range(3):
        tasks.add.enqueue(n, n)
    tasks.always_fails.enqueue("boom")
    run_burst()
    tasks.add.enqueue(9, 9)
    tasks.add.enqueue(8, 8)
    tasks.add.using(run_after=timedelta(hours=1)).enqueue(7, 7)
    samples = scrape()

    expected = stages_in_database()
    assert expected == {"success": 3, "failed": 1, "enqueued": 2, "delayed": 1}
    for stage in Stage:
        assert value(samples, "later_jobs", stage=stage) == expected.get(stage, 0), stage

    since = floor_minute(timezone.now()) - timedelta(hours=1)
    for stage in ("success", "failed", "running"):
        stored = JobTransitionMetric.objects.filter(
            namespace="tests", stage=stage, bucket__gte=since
        ).aggregate(n=Sum("count"))["n"]
        assert value(samples, "later_job_transitions_last_hour", stage=stage) == stored, stage
    assert value(samples, "later_job_transitions_last_hour", stage="success") == 3

    bins = list(
        JobWaitMetric.objects.filter(namespace="tests", mode="regular", bucket__gte=since)
        .values("le_ms")
        .annotate(n=Sum("count"))
        .values_list("le_ms", "n")
    )
    started = sum(n for _, n in bins)
    assert started >= 4  # every attempt of every job waited in the queue once
    hour = {"mode": "regular", "window": "hour"}
    assert value(samples, "later_queue_wait_samples", **hour) == started
    for quantile, fraction in (("0.5", 0.5), ("0.95", 0.95)):
        bound = percentile(bins, fraction)
        assert bound is not None
        assert value(samples, "later_queue_wait_seconds", quantile=quantile, **hour) == (
            bound / 1000
        )


def test_the_oldest_enqueued_job_age_is_measured_from_when_it_became_ready(scrape):
    assert value(scrape(), "later_oldest_enqueued_job_age_seconds") == 0
    tasks.add.using(run_after=timedelta(hours=1)).enqueue(1, 1)  # delayed: not ready
    assert value(scrape(), "later_oldest_enqueued_job_age_seconds") == 0
    first = tasks.add.enqueue(1, 1)
    tasks.add.enqueue(2, 2)
    # The first job became ready five minutes ago, as if no worker had come since.
    ready_at = timezone.now() - timedelta(minutes=5)
    JobIndexRow.objects.filter(job_id=first.id).update(transitioned_at=ready_at)
    DeliveryCommand.objects.filter(job_id=first.id).update(available_at=ready_at)
    became_ready = DeliveryCommand.objects.get(job_id=first.id).available_at
    before = (timezone.now() - became_ready).total_seconds()
    age = value(scrape(), "later_oldest_enqueued_job_age_seconds")
    after = (timezone.now() - became_ready).total_seconds()
    assert before <= age <= after


def test_workers_alive_and_their_busy_slots_come_from_heartbeats_and_leases(start_worker, scrape):
    now = timezone.now()
    Worker.objects.create(  # silent for an hour: not alive
        namespace="tests",
        worker_id="gone:1:abc",
        hostname="gone",
        pid=1,
        concurrency=50,
        started_at=now - timedelta(hours=2),
        heartbeat_at=now - timedelta(hours=1),
    )
    start_worker("--concurrency", "3")
    job = tasks.sleep_only.enqueue(60)

    def running() -> bool:
        """The worker has a heartbeat and holds the job's execution lease."""
        live = Worker.objects.filter(namespace="tests").exclude(worker_id="gone:1:abc")
        return live.exists() and JobExecution.objects.filter(job_id=job.id).exists()

    wait_for(running)
    samples = scrape()
    assert value(samples, "later_workers_alive") == 1
    assert value(samples, "later_worker_slots") == 3
    assert value(samples, "later_worker_busy_slots") == 1


def test_topic_lag_and_blocked_partitions_follow_the_partition_tables(run_burst, scrape):
    a, b, c = keys_in_distinct_partitions(3)
    for n in range(3):
        topic_tasks.step.using(partition_key=a).enqueue(a, n)
    for n in range(2):
        topic_tasks.step.using(partition_key=b).enqueue(b, n)
    topic_tasks.step.using(partition_key=c, run_after=timedelta(hours=1)).enqueue(c, 0)
    samples = scrape()
    assert value(samples, "later_topic_lag", topic="orders") == 6
    assert PartitionJob.objects.filter(namespace="tests", topic="orders").count() == 6
    assert value(samples, "later_topic_partition_lag_max", topic="orders") == 3
    states = {
        state: value(samples, "later_topic_partitions", topic="orders", state=state)
        for state in ("idle", "ready", "running", "leased", "blocked")
    }
    assert states == {"idle": 5, "ready": 2, "running": 0, "leased": 0, "blocked": 1}

    run_burst()
    samples = scrape()
    # Only the delayed head is left; rows of finished jobs are no lag, even before
    # maintenance truncates them.
    assert value(samples, "later_topic_lag", topic="orders") == 1
    assert value(samples, "later_topic_partition_lag_max", topic="orders") == 1
    assert value(samples, "later_topic_partitions", topic="orders", state="blocked") == 1
    assert value(samples, "later_topic_partitions", topic="orders", state="ready") == 0


def test_consumer_group_lag_is_the_log_end_minus_the_committed_offsets(scrape):
    append_many("events", [(f"key-{k}", b"x") for k in range(12)])
    with Consumer("billing", "events", member_id="a") as consumer:
        assert len(consumer.poll(max_records=100)) == 12
        consumer.commit()
    assert value(scrape(), "later_log_consumer_lag", group="billing", topic="events") == 0
    append_many("events", [(f"key-{k}", b"y") for k in range(5)])
    assert value(scrape(), "later_log_consumer_lag", group="billing", topic="events") == 5


def test_a_scrape_never_counts_the_job_or_queue_tables(scrape):
    for n in range(20):
        tasks.add.enqueue(n, n)
    topic_tasks.step.using(partition_key="k").enqueue("k", 1)
    with CaptureQueriesContext(connection) as queries:
        scrape()
    big = ("later_jobs_index", "later_delivery_queue", "later_partition_job", "later_storage")
    for query in queries.captured_queries:
        sql = query["sql"]
        if any(table in sql for table in big):
            assert "COUNT(" not in sql.upper(), sql
    on_index = [q["sql"] for q in queries.captured_queries if "later_jobs_index" in q["sql"]]
    # The oldest ready job (one index entry) and the partition heads' rows (by job id).
    assert on_index
    assert all(" LIMIT " in sql or '"job_id" IN (' in sql for sql in on_index), on_index


def test_every_configured_namespace_is_reported_under_its_own_label(scrape, settings):
    other = {
        "BACKEND": "later_django.backend.LaterBackend",
        "OPTIONS": {"namespace": "others"},
    }
    with override_settings(TASKS={**settings.TASKS, "other": other}):
        tasks.add.using(backend="other").enqueue(1, 1)
        tasks.add.using(backend="other").enqueue(2, 2)
        tasks.add.enqueue(3, 3)
        samples = scrape()
    assert value(samples, "later_jobs", stage="enqueued") == 1
    assert value(samples, "later_jobs", namespace="others", stage="enqueued") == 2
    assert value(samples, "later_workers_alive", namespace="others") == 0
