"""The worker's periodic statements against a large backlog: SQLite and PostgreSQL.

    .venv/bin/python bench/upkeep.py [--db sqlite|postgres|both] [--queued 1000000]
                                     [--ordered 1000000]

Each database is created fresh and dropped afterwards. It is filled with
``--queued`` commands waiting in the delivery queue (no worker holds them) and
16 that one worker has claimed, as while a busy worker drains a backlog, and
with ``--ordered`` jobs queued in the 16 partitions of a topic (each with its
head, half of them leased to another worker). Then the statements every
worker runs at each heartbeat (``LATER_HEARTBEAT_INTERVAL``) are timed 50
times each: the renewal of its leases, and the partition duties (renewal,
truncation behind heads, healing headless partitions), and the queue sample
it takes once a minute. Their cost should follow the worker's own work, not
the backlog; the sample's count of the ordered rows is the exception.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import bench_main, run_child  # noqa: E402

OWNER = "bench-host:1:abcdef"
CLAIMED = 16
REPEAT = 50

FILL_POSTGRES = """
INSERT INTO later_delivery_queue (namespace, queue_name, job_id, priority, available_at,
                                  lease_owner, enqueued_at)
SELECT 'bench', 'default', 'q' || lpad(n::text, 25, '0'), 0,
       now() - interval '1 hour' + n * interval '1 microsecond',
       CASE WHEN n <= %(claimed)s THEN %(owner)s END, now() - interval '1 hour'
FROM generate_series(1, %(total)s) AS n
"""

FILL_SQLITE = """
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %(total)s)
INSERT INTO later_delivery_queue (namespace, queue_name, job_id, priority, available_at,
                                  lease_owner, enqueued_at)
SELECT 'bench', 'default', 'q' || substr('0000000000000000000000000' || i, -25), 0,
       strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-1 hour'),
       CASE WHEN i <= %(claimed)s THEN %(owner)s END,
       strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-1 hour')
FROM n
"""


PARTITIONS = 16
# The ordered backlog: PARTITIONS partitions of topic "bench", each with its head
# at its first row, half of them leased to another worker.
FILL_PARTITIONS_POSTGRES = """
INSERT INTO later_partition_job (namespace, topic, "partition", sequence, job_id, available_at)
SELECT 'bench', 'bench', n %% %(partitions)s, n / %(partitions)s + 1,
       'p' || lpad(n::text, 25, '0'), now() - interval '1 hour'
FROM generate_series(0, %(total)s - 1) AS n
"""

FILL_PARTITIONS_SQLITE = """
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < %(total)s - 1)
INSERT INTO later_partition_job (namespace, topic, "partition", sequence, job_id, available_at)
SELECT 'bench', 'bench', i %% %(partitions)s, i / %(partitions)s + 1,
       'p' || substr('0000000000000000000000000' || i, -25),
       strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', '-1 hour')
FROM n
"""


def fill_partitions(cursor, vendor: str, total: int) -> None:
    fill = FILL_PARTITIONS_POSTGRES if vendor == "postgresql" else FILL_PARTITIONS_SQLITE
    cursor.execute(fill, {"total": total, "partitions": PARTITIONS})
    cursor.execute(
        'INSERT INTO later_partition_sequence (namespace, topic, "partition", next_sequence) '
        'SELECT namespace, topic, "partition", MAX(sequence) + 1 FROM later_partition_job '
        'GROUP BY namespace, topic, "partition"'
    )
    cursor.execute(
        'INSERT INTO later_partition_head (namespace, topic, "partition", sequence, job_id, '
        'available_at) SELECT namespace, topic, "partition", sequence, job_id, available_at '
        "FROM later_partition_job WHERE sequence = 1"
    )
    cursor.execute(
        'INSERT INTO later_partition_lease (namespace, topic, "partition", owner, expires_at, '
        'epoch) SELECT namespace, topic, "partition", %s, available_at, 1 '
        'FROM later_partition_head WHERE "partition" %% 2 = 0',
        ["bench-host:2:fedcba"],
    )


def timed(action) -> str:
    """p50 / p95 of REPEAT runs of ``action``, in milliseconds."""
    seconds = []
    for _ in range(REPEAT):
        began = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - began)
    seconds.sort()
    median = statistics.median(seconds) * 1000
    p95 = seconds[int(len(seconds) * 0.95) - 1] * 1000
    return f"{median:.2f} ms / {p95:.2f} ms"


def child_main(mode: str, args: list[str]) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from later_django.worker import leases, maintenance

    if mode == "fill":
        call_command("migrate", verbosity=0)
        total = int(args[0]) + CLAIMED
        fill = FILL_POSTGRES if connection.vendor == "postgresql" else FILL_SQLITE
        with connection.cursor() as cursor:
            cursor.execute(fill, {"total": total, "claimed": CLAIMED, "owner": OWNER})
            cursor.execute(
                "INSERT INTO later_job_execution (namespace, job_id, owner, epoch, started_at, "
                "lease_expires_at) SELECT namespace, job_id, lease_owner, 1, available_at, "
                "available_at FROM later_delivery_queue WHERE lease_owner IS NOT NULL"
            )
            fill_partitions(cursor, connection.vendor, int(args[1]))
            cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
        return
    if mode == "times":
        from later_django.topics import upkeep

        def renew_partitions() -> None:
            upkeep.renew("bench", OWNER, lease_seconds=30, using="default")

        for name, action in [
            (
                "lease renewal, 16 claimed commands",
                lambda: leases.renew("bench", OWNER, lease_seconds=30, using="default"),
            ),
            ("partition lease renewal", renew_partitions),
            (
                "partition truncation (nothing behind heads)",
                lambda: upkeep.truncate("bench", using="default"),
            ),
            (
                "partition healing (every partition has a head)",
                lambda: upkeep.heal("bench", using="default"),
            ),
            (
                "queue sample (once a minute; counts the ordered rows)",
                lambda: maintenance.record_queue_sample("bench", using="default"),
            ),
        ]:
            print(f"{name:55} {timed(action)}")
        return
    raise SystemExit(f"unknown mode {mode!r}")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queued", type=int, default=1_000_000)
    parser.add_argument("--ordered", type=int, default=1_000_000)


def each(kind: str, url: str, options: argparse.Namespace) -> None:
    print(f"== {kind} (p50 / p95 of {REPEAT} runs)")
    began = time.monotonic()
    run_child(__file__, "fill", url, str(options.queued), str(options.ordered))
    print(
        f"filled {options.queued:,} queued commands and {options.ordered:,} ordered "
        f"jobs in {PARTITIONS} partitions in {time.monotonic() - began:.0f} s"
    )
    print(run_child(__file__, "times", url))


def main() -> None:
    bench_main(__doc__ or "", child_main, add_options, each)


if __name__ == "__main__":
    main()
