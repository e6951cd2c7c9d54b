"""Ordered (topic) throughput: 16 partitions, several workers, SQLite and PostgreSQL.

    .venv/bin/python bench/topics.py [--db sqlite|postgres|both] [--jobs 8000] [--keys 64]
                                     [--workers 3] [--concurrency 4]

Each database is created fresh and dropped afterwards. Figures: ordered
enqueue (one job per transaction), bulk ordered enqueue (``enqueue_many`` per
key), and the drain rate of ``--jobs`` queued no-op ordered jobs spread over
``--keys`` keys of the 16-partition topic ``bench``, first by one worker, then
by ``--workers`` workers at once. After each drain the run checks that every
partition ran its jobs strictly one after another, in sequence order. On
PostgreSQL the tables are ANALYZEd before each drain, as autovacuum would.
"""

from __future__ import annotations

import argparse
import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import bench_env, bench_main, count, run_child  # noqa: E402

if __name__ != "__main__" and os.environ.get("DJANGO_SETTINGS_MODULE"):
    # Imported by workers and by this script's own children, with Django set up.
    from later_django import task

    @task(topic="bench")
    def ordered_noop(key: str, n: int) -> None:
        return None


def child(mode: str, url: str, *args: str) -> str:
    return run_child(__file__, mode, url, *args)


def worker(url: str, concurrency: int) -> subprocess.Popen[bytes]:
    env = bench_env(url, LATER_POLL_INTERVAL="0.2")
    return subprocess.Popen(
        [sys.executable, "-m", "django", "later_worker", "--concurrency", str(concurrency)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def drain(url: str, jobs: int, keys: int, workers: int, concurrency: int) -> str:
    child("enqueue_bulk", url, str(jobs), str(keys))
    if not url.startswith("sqlite:///"):
        import psycopg

        # A database filled seconds ago has no planner statistics yet; autovacuum
        # gathers them within a minute in any real deployment.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
    procs = [worker(url, concurrency) for _ in range(workers)]
    try:
        while remaining(url) > 0:
            time.sleep(0.5)
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    return child("drain_rate", url)


def remaining(url: str) -> int:
    """Queued ordered jobs."""
    return count(url, "SELECT COUNT(*) FROM later_partition_job")


def run(url: str, jobs: int, keys: int, workers: int, concurrency: int) -> dict[str, str]:
    child("migrate", url)
    figures: dict[str, str] = {}
    figures["ordered enqueue, one per transaction"] = child("enqueue_single", url, "2000") + " /s"
    child("clear", url)
    figures["bulk ordered enqueue (enqueue_many per key)"] = (
        child("enqueue_bulk", url, str(jobs), str(keys)) + " /s"
    )
    child("clear", url)
    figures[f"drain {jobs} jobs, 1 worker x {concurrency}"] = drain(url, jobs, keys, 1, concurrency)
    child("clear", url)
    figures[f"drain {jobs} jobs, {workers} workers x {concurrency}"] = drain(
        url, jobs, keys, workers, concurrency
    )
    return figures


def child_main(mode: str, args: list[str]) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from bench.topics import ordered_noop

    if mode == "migrate":
        call_command("migrate", verbosity=0)
    elif mode == "enqueue_single":
        n = int(args[0])
        began = time.perf_counter()
        for i in range(n):
            with transaction.atomic():
                ordered_noop.using(partition_key=f"k{i % 64}").enqueue(f"k{i % 64}", i)
        print(f"{n / (time.perf_counter() - began):,.0f}")
    elif mode == "enqueue_bulk":
        n, keys = int(args[0]), int(args[1])
        began = time.perf_counter()
        for k in range(keys):
            key = f"key-{k}"
            count = n // keys + (1 if k < n % keys else 0)
            ordered_noop.using(partition_key=key).enqueue_many(
                [((key, i), {}) for i in range(count)]
            )
        print(f"{n / (time.perf_counter() - began):,.0f}")
    elif mode == "clear":
        with transaction.atomic(), connection.cursor() as cursor:
            for table in (
                "later_partition_job",
                "later_partition_head",
                "later_job_execution",
                "later_jobs_index",
                "later_storage",
            ):
                cursor.execute(f"DELETE FROM {table}")
    elif mode == "drain_rate":
        print(_drain_rate(connection))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


def _drain_rate(connection) -> str:
    from later_django.db import from_db

    with connection.cursor() as cursor:
        cursor.execute(
            'SELECT "partition", sequence, started_at, finished_at FROM later_jobs_index '
            "WHERE stage = 'success' ORDER BY \"partition\", sequence"
        )
        rows = [(p, s, from_db(a), from_db(b)) for p, s, a, b in cursor.fetchall()]
    for before, after in itertools.pairwise(rows):
        if before[0] == after[0] and (after[2] < before[3] or after[1] <= before[1]):
            raise SystemExit(f"partition {after[0]} ran sequence {after[1]} out of order")
    seconds = (max(r[3] for r in rows) - min(r[2] for r in rows)).total_seconds()
    return f"{len(rows) / seconds:,.0f} jobs/s ({len(rows)} jobs in {seconds:.1f}s, order checked)"


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--jobs", type=int, default=8000)
    parser.add_argument("--keys", type=int, default=64)
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)


def each(kind: str, url: str, options: argparse.Namespace) -> None:
    print(f"== {kind}", flush=True)
    figures = run(url, options.jobs, options.keys, options.workers, options.concurrency)
    for name, value in figures.items():
        print(f"{name:50} {value}", flush=True)


def main() -> None:
    bench_main(__doc__ or "", child_main, add_options, each)


if __name__ == "__main__":
    main()
