"""Render every dashboard page against a large job index on PostgreSQL and time it.

    .venv/bin/python bench/dashboard.py [--jobs 1000000] [--repeat 20] [--keep]

Creates a throwaway PostgreSQL database (``LATER_PG_ADMIN_URL``, default
postgresql://postgres@127.0.0.1:5432/postgres), migrates it, fills
``later_jobs_index`` with ``--jobs`` rows in one ``generate_series`` statement
(plus stage counters, a week of queue samples, an hour of metric buckets,
workers, a 64-partition topic and consumer groups), then renders each page
with Django's test client as a staff user and prints the median and p95
milliseconds per page. The database is dropped afterwards unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG_ADMIN = os.environ.get("LATER_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")
NAMESPACE = "bench"
BUDGET_MS = 300.0
PARTITIONS = 64

# Share of the index per stage; the rest of the million is "success".
STAGE_SHARES = [
    ("failed", 0.03),
    ("cancelled", 0.01),
    ("enqueued", 0.05),
    ("delayed", 0.03),
    ("requeued", 0.01),
    ("running", 0.001),
    ("waiting", 0.019),
]

urlpatterns: list[object] = []


def configure(database: str) -> None:
    from django.conf import settings

    settings.configure(
        SECRET_KEY="later-django-dashboard-bench",
        DEBUG=False,
        ALLOWED_HOSTS=["*"],
        USE_TZ=True,
        TIME_ZONE="UTC",
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "django.contrib.staticfiles",
            "later_django",
        ],
        MIDDLEWARE=[
            "django.contrib.sessions.middleware.SessionMiddleware",
            "django.middleware.common.CommonMiddleware",
            "django.middleware.csrf.CsrfViewMiddleware",
            "django.contrib.auth.middleware.AuthenticationMiddleware",
            "django.contrib.messages.middleware.MessageMiddleware",
        ],
        ROOT_URLCONF=__name__,
        TEMPLATES=[
            {
                "BACKEND": "django.template.backends.django.DjangoTemplates",
                "APP_DIRS": True,
                "OPTIONS": {
                    "context_processors": [
                        "django.template.context_processors.request",
                        "django.contrib.auth.context_processors.auth",
                        "django.contrib.messages.context_processors.messages",
                    ]
                },
            }
        ],
        STATIC_URL="static/",
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.postgresql",
                "NAME": database,
                **_connection_params(),
            }
        },
        TASKS={
            "default": {
                "BACKEND": "later_django.backend.LaterBackend",
                "OPTIONS": {"namespace": NAMESPACE, "topics": {"orders": PARTITIONS}},
            }
        },
    )
    import django

    django.setup()
    from django.contrib import admin
    from django.urls import path

    urlpatterns.append(path("admin/", admin.site.urls))


def _connection_params() -> dict[str, object]:
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(PG_ADMIN)
    return {
        "USER": info.get("user", "postgres"),
        "PASSWORD": info.get("password", ""),
        "HOST": info.get("host", "127.0.0.1"),
        "PORT": info.get("port", "5432"),
    }


FILL_INDEX = """
INSERT INTO later_jobs_index (
    namespace, job_id, task_path, queue_name, priority, stage, revision, attempts,
    enqueued_at, run_at, started_at, finished_at, transitioned_at, worker_id,
    topic, partition, sequence, parent_job_id, date_expire
)
SELECT %(ns)s,
       '01jbench' || lpad(i::text, 18, '0'),
       'shop.tasks.task_' || (i %% 20),
       CASE WHEN i %% 200 = 0 THEN 'reports' WHEN i %% 3 = 0 THEN 'emails' ELSE 'default' END,
       0, stage, 1, CASE WHEN stage IN ('failed', 'requeued') THEN 3 ELSE 1 END,
       at - interval '2 seconds',
       CASE WHEN stage IN ('delayed', 'requeued')
            THEN now() + (i %% 3600) * interval '1 second' END,
       CASE WHEN stage IN ('running', 'success', 'failed') THEN at - interval '1 second' END,
       CASE WHEN stage IN ('success', 'failed', 'cancelled') THEN at END,
       at,
       CASE WHEN stage = 'running' THEN 'bench-host:' || (i %% 20) || ':abcdef' END,
       CASE WHEN i %% 10 = 0 THEN 'orders' END,
       CASE WHEN i %% 10 = 0 THEN (i / 10) %% %(partitions)s END,
       CASE WHEN i %% 10 = 0 THEN i / 10 / %(partitions)s + 1 END,
       CASE WHEN stage = 'waiting' THEN '01jbench' || lpad((i - 1)::text, 18, '0') END,
       CASE WHEN stage IN ('success', 'failed', 'cancelled') THEN now() + interval '7 days' END
FROM (
    SELECT i,
           now() - (%(jobs)s - i) * (interval '7 days' / %(jobs)s) AS at,
           CASE {stage_cases} ELSE 'success' END AS stage
    FROM generate_series(1, %(jobs)s) AS i
) AS jobs
"""


def stage_cases() -> str:
    """Spread the stages over the index by i modulo 1000 so every stage spans the week."""
    cases, start = [], 0
    for stage, share in STAGE_SHARES:
        width = max(int(share * 1000), 1)
        cases.append(f"WHEN i %% 1000 BETWEEN {start} AND {start + width - 1} THEN '{stage}'")
        start += width
    return " ".join(cases)


def fill(jobs: int) -> dict[str, str]:
    """Fill the tables; return sample ids and names for the pages to render."""
    from django.db import connection

    started = time.monotonic()
    with connection.cursor() as cursor:
        # Bulk load without the per-row count triggers, then count once.
        cursor.execute("SET session_replication_role = replica")
        cursor.execute(
            FILL_INDEX.format(stage_cases=stage_cases()),
            {"ns": NAMESPACE, "jobs": jobs, "partitions": PARTITIONS},
        )
        cursor.execute("SET session_replication_role = DEFAULT")
        cursor.execute(
            "INSERT INTO later_stage_counts (namespace, stage, count) "
            "SELECT namespace, stage, COUNT(*) FROM later_jobs_index GROUP BY namespace, stage"
        )
        cursor.execute(
            """
            INSERT INTO later_delivery_queue
                (namespace, queue_name, job_id, priority, available_at, enqueued_at)
            SELECT namespace, queue_name, job_id, 0, transitioned_at, enqueued_at
            FROM later_jobs_index WHERE stage = 'enqueued' AND topic IS NULL
            """
        )
        cursor.execute(
            """
            INSERT INTO later_job_execution
                (namespace, job_id, owner, epoch, started_at, lease_expires_at)
            SELECT namespace, job_id, worker_id, 1, started_at, now() + interval '30 seconds'
            FROM later_jobs_index WHERE stage = 'running' AND topic IS NULL
            """
        )
        _fill_topic(cursor)
        _fill_metrics(cursor)
        _fill_schedules(cursor)
    print(f"filled {jobs:,} jobs and the side tables in {time.monotonic() - started:.1f} s")
    samples = _sample_jobs()
    with connection.cursor() as cursor:
        started = time.monotonic()
        cursor.execute("VACUUM ANALYZE")
        print(f"VACUUM ANALYZE took {time.monotonic() - started:.1f} s")
    return samples


def _fill_topic(cursor: object) -> None:
    run = cursor.execute  # type: ignore[attr-defined]
    run(
        "INSERT INTO later_topic (namespace, name, partition_count, created_at) "
        "VALUES (%s, 'orders', %s, now() - interval '7 days') "
        "ON CONFLICT (namespace, name) DO NOTHING",
        [NAMESPACE, PARTITIONS],
    )
    # Every topic job not yet finished is queued in its partition.
    run(
        """
        INSERT INTO later_partition_job
            (namespace, topic, partition, sequence, job_id, available_at)
        SELECT namespace, topic, partition, sequence, job_id, COALESCE(run_at, transitioned_at)
        FROM later_jobs_index
        WHERE topic IS NOT NULL AND stage NOT IN ('success', 'failed', 'cancelled')
        """
    )
    run(
        """
        INSERT INTO later_partition_head
            (namespace, topic, partition, sequence, job_id, available_at)
        SELECT DISTINCT ON (partition) namespace, topic, partition, sequence, job_id, available_at
        FROM later_partition_job ORDER BY partition, sequence
        """
    )
    run(
        """
        INSERT INTO later_partition_sequence (namespace, topic, partition, next_sequence)
        SELECT namespace, topic, partition, MAX(sequence) + 1 FROM later_jobs_index
        WHERE topic IS NOT NULL GROUP BY namespace, topic, partition
        """
    )
    run(
        """
        INSERT INTO later_partition_lease (namespace, topic, partition, owner, expires_at, epoch)
        SELECT %s, 'orders', p, 'bench-host:' || (p %% 20) || ':abcdef',
               now() + interval '20 seconds', p %% 7 + 1
        FROM generate_series(0, %s - 1) AS p WHERE p %% 3 = 0
        """,
        [NAMESPACE, PARTITIONS],
    )
    run(
        """
        INSERT INTO later_log_partition (namespace, topic, partition, next_offset)
        SELECT %s, 'orders', p, 100000 + p FROM generate_series(0, %s - 1) AS p
        """,
        [NAMESPACE, PARTITIONS],
    )
    run(
        """
        INSERT INTO later_log_consumer_offset
            (namespace, "group", topic, partition, next_offset, updated_at)
        SELECT %s, 'group-' || g, 'orders', p, 100000 - g * 17 - p, now()
        FROM generate_series(1, 5) AS g, generate_series(0, %s - 1) AS p
        """,
        [NAMESPACE, PARTITIONS],
    )


def _fill_metrics(cursor: object) -> None:
    run = cursor.execute  # type: ignore[attr-defined]
    minute = "date_trunc('minute', now())"
    run(
        f"""
        INSERT INTO later_queue_sample (namespace, minute, queued, partitioned)
        SELECT %s, {minute} - m * interval '1 minute',
               50000 + (20000 * sin(m / 180.0))::bigint, 1000 + m %% 300
        FROM generate_series(0, 7 * 24 * 60 - 1) AS m
        """,
        [NAMESPACE],
    )
    run(
        f"""
        INSERT INTO later_job_transition_metrics (namespace, stage, bucket, count)
        SELECT %s, s, {minute} - m * interval '1 minute', 600 + m %% 37
        FROM generate_series(0, 60) AS m,
             unnest(ARRAY['enqueued', 'running', 'success', 'failed', 'requeued']) AS s
        """,
        [NAMESPACE],
    )
    run(
        f"""
        INSERT INTO later_job_wait_metrics (namespace, mode, bucket, le_ms, count)
        SELECT %s, mode, {minute} - m * interval '1 minute', le, 1 + (le %% 97)
        FROM generate_series(0, 60) AS m,
             unnest(ARRAY['regular', 'sequential']) AS mode,
             unnest(ARRAY[1, 5, 10, 50, 100, 250, 1000, 5000, 30000]) AS le
        """,
        [NAMESPACE],
    )
    run(
        """
        INSERT INTO later_worker
            (namespace, worker_id, hostname, pid, queues, concurrency, started_at, heartbeat_at)
        SELECT %s, 'bench-host:' || w || ':abcdef', 'bench-host', w, '[]'::jsonb, 8,
               now() - interval '1 hour', now() - (w %% 4) * interval '10 seconds'
        FROM generate_series(0, 19) AS w
        """,
        [NAMESPACE],
    )


SCHEDULES = 250  # more than the page shows (200), so its bound is what is timed


def _fill_schedules(cursor: object) -> None:
    """Schedules whose last occurrences are jobs of the index, a third of them sequential."""
    import msgpack

    payload = msgpack.packb(
        {
            "args": [{"report": "sales"}],
            "kwargs": {"dry_run": False},
            "queue_name": "default",
            "priority": 0,
        }
    )
    cursor.execute(  # type: ignore[attr-defined]
        """
        INSERT INTO later_schedule (namespace, identifier, cron, time_zone, task_path, payload,
            sequential, origin, next_run_at, last_run_at, last_job_id, revision, created_at,
            updated_at)
        SELECT %s, 'report-' || lpad(s::text, 3, '0'), '*/5 * * * *', 'UTC',
               'shop.tasks.task_' || (s %% 20), %s, s %% 3 = 0, 'code',
               now() + (s %% 300) * interval '1 second', now() - interval '5 minutes',
               j.job_id, 1, now(), now()
        FROM generate_series(0, %s - 1) AS s
        LEFT JOIN LATERAL (SELECT job_id FROM later_jobs_index WHERE namespace = %s
                           ORDER BY id DESC OFFSET s LIMIT 1) AS j ON true
        """,
        [NAMESPACE, payload, SCHEDULES, NAMESPACE],
    )


def _sample_jobs() -> dict[str, str]:
    """Store full records for the jobs whose detail pages are timed."""
    from django.db.models import Max

    from later_django.models import JobIndexRow, StorageValue
    from later_django.records import Attempt, ErrorEntry, JobRecord, job_key, to_micros

    rows = JobIndexRow.objects.filter(namespace=NAMESPACE)
    failed = rows.filter(stage="failed").order_by("-transitioned_at").first()
    parent = rows.filter(stage="waiting").order_by("-transitioned_at").first()
    assert failed is not None
    assert parent is not None
    waiting_parent = rows.get(job_id=parent.parent_job_id)
    middle = (
        (rows.filter(topic="orders", partition=5).aggregate(Max("sequence"))["sequence__max"]) // 2
    )
    topic_job = rows.get(topic="orders", partition=5, sequence=middle)
    traceback = "Traceback (most recent call last):\n" + '  File "shop/tasks.py", line 12\n' * 30
    for row in (failed, waiting_parent, topic_job):
        at = to_micros(row.transitioned_at) or 0
        record = JobRecord(
            id=row.job_id,
            task_path=row.task_path,
            args=[{"order": i, "lines": list(range(5))} for i in range(10)],
            kwargs={"notify": True},
            queue_name=row.queue_name,
            priority=0,
            backend="default",
            enqueued_at=at,
            max_attempts=3,
            attempts=[Attempt(f"bench-host:{i}:abcdef", at, at, "error") for i in range(3)],
            errors=[
                ErrorEntry("builtins.RuntimeError", traceback, at, f"bench-host:{i}:abcdef")
                for i in range(3)
            ],
            stage=row.stage,
            topic=row.topic,
            partition=row.partition,
            sequence=row.sequence,
            parent_id=row.parent_job_id,
        )
        StorageValue.objects.create(
            namespace=NAMESPACE, key=job_key(row.job_id), value=record.encode()
        )
    return {"failed": failed.job_id, "parent": waiting_parent.job_id, "topic_job": topic_job.job_id}


def pages(samples: dict[str, str]) -> list[tuple[str, str]]:
    from django.urls import reverse

    from later_django.dashboard.listing import Cursor
    from later_django.models import JobIndexRow

    def url(name: str, *args: object) -> str:
        return reverse(f"admin:later_dashboard_{name}", args=args)

    # A cursor half-way down the success stage: keyset pages cost the same anywhere.
    deep = (
        JobIndexRow.objects.filter(namespace=NAMESPACE, stage="success")
        .order_by("-transitioned_at", "-id")
        .only("transitioned_at")[400_000:400_001]
        .first()
    )
    deep_cursor = str(Cursor.of(deep)) if deep else ""
    return [
        ("admin index", "/admin/"),
        ("overview", url("changelist")),
        ("overview live refresh", url("live")),
        ("jobs: success, first page", url("jobs", "success")),
        ("jobs: success, deep cursor", f"{url('jobs', 'success')}?after={deep_cursor}"),
        ("jobs: failed", url("jobs", "failed")),
        ("jobs: running", url("jobs", "running")),
        ("jobs: enqueued, from the queue", url("jobs", "enqueued")),
        ("jobs: enqueued, task filter", f"{url('jobs', 'enqueued')}?task=shop.tasks.task_7"),
        ("jobs: enqueued, rare queue filter", f"{url('jobs', 'enqueued')}?queue=reports"),
        ("jobs: success, task filter", f"{url('jobs', 'success')}?task=shop.tasks.task_7"),
        ("jobs: success, rare queue filter", f"{url('jobs', 'success')}?queue=reports"),
        (
            "jobs: failed, task + queue",
            f"{url('jobs', 'failed')}?task=shop.tasks.task_3&queue=emails",
        ),
        ("job detail: failed, 3 errors", url("job", samples["failed"])),
        ("job detail: with continuation", url("job", samples["parent"])),
        ("job detail: topic neighbours", url("job", samples["topic_job"])),
        ("retry confirmation", url("action", samples["failed"], "retry")),
        ("schedules", url("schedules")),
        ("topics + consumer groups", url("topics")),
        ("topic partitions", url("topic", "orders")),
        ("partition jobs", url("partition", "orders", 5)),
        ("changelist: jobs", "/admin/later/jobindexrow/"),
        ("changelist: jobs, stage=failed", "/admin/later/jobindexrow/?stage__exact=failed"),
        ("changelist: jobs, stage=enqueued", "/admin/later/jobindexrow/?stage__exact=enqueued"),
        ("changelist: delivery queue", "/admin/later/deliverycommand/"),
    ]


def measure(samples: dict[str, str], repeat: int) -> bool:
    from django.contrib.auth.models import Permission, User
    from django.test import Client

    staff = User.objects.create_user("bench", password="bench", is_staff=True)
    staff.user_permissions.add(
        *Permission.objects.filter(
            codename__in=["view_jobindexrow", "change_jobindexrow", "view_deliverycommand"]
        )
    )
    client = Client()
    client.force_login(staff)
    within = True
    print(f"\n{'page':<36} {'median ms':>10} {'p95 ms':>8}")
    for name, path in pages(samples):
        for _ in range(2):
            response = client.get(path)
            if response.status_code != 200:
                raise SystemExit(f"{name}: {path} answered {response.status_code}")
        timings = []
        for _ in range(repeat):
            started = time.perf_counter()
            client.get(path)
            timings.append((time.perf_counter() - started) * 1000)
        timings.sort()
        median = statistics.median(timings)
        p95 = timings[min(len(timings) - 1, round(0.95 * (len(timings) - 1)))]
        flag = "" if p95 < BUDGET_MS else "  over budget"
        within = within and p95 < BUDGET_MS
        print(f"{name:<36} {median:>10.1f} {p95:>8.1f}{flag}")
    return within


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    options = parser.parse_args()
    if options.jobs < 20_000:
        parser.error("--jobs must be at least 20000 so every stage has rows")

    import psycopg

    name = f"later_dash_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        configure(name)
        from django.core.management import call_command
        from django.db import connection

        call_command("migrate", verbosity=0)
        samples = fill(options.jobs)
        with connection.cursor() as cursor:
            cursor.execute("SELECT version()")
            print(cursor.fetchone()[0].split(",")[0])
        within = measure(samples, options.repeat)
        print(f"\nevery page's p95 under {BUDGET_MS:.0f} ms: {'yes' if within else 'NO'}")
        return 0 if within else 1
    finally:
        from django.db import connections

        connections.close_all()
        if options.keep:
            print(f"kept database {name}")
        else:
            with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


if __name__ == "__main__":
    sys.exit(main())
