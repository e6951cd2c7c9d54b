"""The soak's Django side, run in child processes: its tables, the enqueue and the feeder."""

from __future__ import annotations

import random
import time

from django.core.management import call_command
from django.db import connection, transaction

from bench.tasks import soak_ordered, soak_ordered_atomic, soak_plain, soak_plain_atomic

FEED_JOB_SECONDS = 0.2
BATCH = 5000


def setup() -> None:
    """Migrate, and create the tables where jobs and their runs are noted."""
    call_command("migrate", verbosity=0)
    auto = "INTEGER PRIMARY KEY AUTOINCREMENT" if connection.vendor == "sqlite" else "BIGSERIAL"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE bench_soak_job (job_id VARCHAR(40) PRIMARY KEY, "
            "key VARCHAR(40) NOT NULL, n INTEGER NOT NULL)"
        )
        cursor.execute(
            f"CREATE TABLE bench_soak_run (id {auto}, key VARCHAR(40) NOT NULL, "
            "n INTEGER NOT NULL, pid INTEGER NOT NULL, started DOUBLE PRECISION NOT NULL, "
            "finished DOUBLE PRECISION NOT NULL)"
        )
        cursor.execute("CREATE INDEX bench_soak_run_job ON bench_soak_run (key, n)")


def _note(results, key: str, numbers: range) -> None:
    """Note which job is which key and number, in the enqueue's transaction."""
    with connection.cursor() as cursor:
        cursor.executemany(
            "INSERT INTO bench_soak_job (job_id, key, n) VALUES (%s, %s, %s)",
            [(result.id, key, n) for result, n in zip(results, numbers, strict=True)],
        )


def _enqueue_plain(numbers: range, seconds: float = 0.0, *, atomic: bool = False) -> None:
    calls = [((n, seconds) if seconds else (n,), {}) for n in numbers]
    task = soak_plain_atomic if atomic else soak_plain
    with transaction.atomic():
        _note(task.enqueue_many(calls), "", numbers)


def _enqueue_ordered(
    key: str, numbers: range, seconds: float = 0.0, *, atomic: bool = False
) -> None:
    calls = [((key, n, seconds) if seconds else (key, n), {}) for n in numbers]
    task = soak_ordered_atomic if atomic else soak_ordered
    with transaction.atomic():
        _note(task.using(partition_key=key).enqueue_many(calls), key, numbers)


def enqueue(plain: int, ordered: int, keys: int, *, atomic: bool = False) -> None:
    """Enqueue the soak's jobs; with ``atomic``, of the tasks that run atomically."""
    for start in range(0, plain, BATCH):
        _enqueue_plain(range(start, min(plain, start + BATCH)), atomic=atomic)
    for k in range(keys):
        count = ordered // keys + (1 if k < ordered % keys else 0)
        _enqueue_ordered(f"key-{k}", range(count), atomic=atomic)


def feed(low: int, keys: int) -> None:
    """Keep at least ``low`` jobs queued, each taking ``FEED_JOB_SECONDS``, until killed."""
    plain = 0
    ordered = dict.fromkeys((f"key-{k}" for k in range(keys)), 0)
    while True:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*) FROM later_jobs_index WHERE namespace = 'bench' "
                "AND stage = 'enqueued'"
            )
            queued = cursor.fetchone()[0]
        if queued < low:
            _enqueue_plain(range(plain, plain + low), FEED_JOB_SECONDS)
            plain += low
            for key in random.sample(sorted(ordered), min(keys, max(1, low // 4))):
                _enqueue_ordered(key, range(ordered[key], ordered[key] + 1), FEED_JOB_SECONDS)
                ordered[key] += 1
        time.sleep(0.1)
