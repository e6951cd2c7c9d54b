"""Throughput, latency and memory of ordinary jobs on SQLite and PostgreSQL.

    .venv/bin/python bench/jobs.py [--db sqlite|postgres|both] [--drain 20000] [--memory 100000]

Each database is created fresh and dropped afterwards. Figures:
enqueue (one job per transaction, opened by ``transaction.atomic()`` or
autocommit's own), bulk enqueue, drain of queued no-op jobs by
one ``later_worker`` process, enqueue-to-start latency on an idle worker,
the time ``enqueue()`` adds to a ``transaction.atomic()`` block that saves
one model row, against the time a second row adds (the target is 1.0x or
less), reference figures (one bare row inserted into a logged table per
``transaction.atomic()`` through the driver: BEGIN, INSERT and COMMIT, the
ceiling for the first enqueue figure; the bulk figure's rows, built
beforehand, written by the driver alone into trigger-less copies of the job
tables, the ceiling for the bulk figure; and the driver's round trip of
``SELECT 1``, to compare machines; on PostgreSQL, the rows a second that 8
and 2 threads commit one at a time with no queue running, the ceiling of a
drain whose jobs each commit one row), the CPU the whole machine spent per
drained job (Linux), on PostgreSQL the WAL the server wrote per drained job,
and (with ``--memory N``) the worker's resident memory while it drains N
jobs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import bench_env, bench_main, count, run_child  # noqa: E402


def child(mode: str, url: str, *args: str) -> str:
    return run_child(__file__, mode, url, *args)


def worker(url: str, *args: str, poll: str = "1.0") -> subprocess.Popen[bytes]:
    env = bench_env(url, LATER_POLL_INTERVAL=poll)
    return subprocess.Popen(
        [sys.executable, "-m", "django", "later_worker", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def machine_cpu_seconds() -> float:
    """CPU time spent by every process on this machine so far (Linux); 0.0 elsewhere."""
    stat = Path("/proc/stat")
    if not stat.exists():
        return 0.0
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, stat.read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def run(kind: str, url: str, drain: int, memory: int) -> dict[str, str]:
    child("migrate", url)
    figures: dict[str, str] = {}
    figures["enqueue one per transaction, in transaction.atomic()"] = (
        child("enqueue_single", url, "3000") + " jobs/s"
    )
    figures["enqueue one per transaction, in autocommit"] = (
        child("enqueue_autocommit", url, "3000") + " jobs/s"
    )
    # What users feel: enqueue() inside a block that saves a model row anyway.
    figures["time enqueue() adds to an atomic block saving one row, vs a second row"] = child(
        "enqueue_in_atomic", url, "2000"
    )
    # The machine's ceiling for that figure: one bare row per transaction, no Django.
    figures["(reference) BEGIN, one bare row, COMMIT"] = child("floor", url, "3000") + " rows/s"
    figures["(reference) SELECT 1 round trip"] = child("round_trip", url, "3000")
    if kind == "postgres":
        # A drain's ceiling when each job commits one row of its own (the peers' benchmark
        # body): threads committing such rows with no queue at all, as many as the default
        # slots and as `--concurrency 2`.
        for threads in (8, 2):
            figures[f"(reference) {threads} threads committing one row each, no queue"] = (
                child("commit_ceiling", url, str(threads), "20000") + " rows/s"
            )
    figures["bulk enqueue"] = child("enqueue_bulk", url, str(drain)) + " jobs/s"
    # Its ceiling: the same rows, built beforehand, written to copies of the job tables.
    figures["(reference) the bulk figure's rows, by the driver alone"] = (
        child("bulk_floor", url, str(drain)) + " jobs/s"
    )
    # The bulk run queued `drain` jobs: one burst worker drains them.
    wal_before = child("wal_position", url) if kind == "postgres" else ""
    cpu_before = machine_cpu_seconds()
    proc = worker(url, "--burst", "--concurrency", "8")
    _, err = proc.communicate(timeout=3600)
    if proc.returncode:
        raise SystemExit(err.decode())
    cpu_used = machine_cpu_seconds() - cpu_before
    # Every job queued so far: the bulk ones, the 2 x 3,000 enqueued one at a time and the
    # 2,100 enqueued inside blocks that save a row (100 of them to warm up).
    figures["drain of every queued no-op job, one worker"] = child("drain_rate", url) + " jobs/s"
    jobs = succeeded(url)
    if cpu_before:
        # On a machine of few cores every process's CPU slows the others' commits: this
        # is what the drain cost the whole machine (worker, database and kernel).
        figures["machine CPU per drained job (every process)"] = f"{cpu_used / jobs * 1e6:,.0f} µs"
    if wal_before:
        # What the drain cost the server's log: every commit waits for its flush, the
        # bodies' of a real workload too, so this is the drain's share of the disk.
        written = int(child("wal_since", url, wal_before))
        figures["WAL written per drained job (whole server)"] = f"{written / jobs:,.0f} bytes"
    idle = worker(url, "--concurrency", "8", poll="1.0")
    time.sleep(3)
    figures["idle wake-up (200 jobs) p50 / p95"] = child("latency", url, "200")
    idle.terminate()
    idle.wait(timeout=60)
    if memory:
        child("enqueue_bulk", url, str(memory))
        figures[f"worker RSS at 10 / 50 / 100 % of {memory} jobs (MiB)"] = drain_memory(url, memory)
    return figures


def drain_memory(url: str, jobs: int) -> str:
    """The resident memory of a burst worker draining ``jobs`` queued jobs, read when it
    has finished a tenth of them, half and all: from the first reading on, its start-up
    is behind it, so the three compare what running the jobs costs."""
    before = succeeded(url)
    proc = worker(url, "--burst", "--concurrency", "8")
    readings: list[tuple[int, int]] = []  # (jobs finished, RSS in KiB)
    while proc.poll() is None:
        rss = rss_kib(proc.pid)
        if rss:
            readings.append((succeeded(url) - before, rss))
        time.sleep(0.2)
    marks = []
    for share in (0.1, 0.5):
        marks.append(next((rss for done, rss in readings if done >= jobs * share), None))
    marks.append(readings[-1][1] if readings else None)
    return " / ".join("?" if rss is None else f"{rss / 1024:.0f}" for rss in marks)


def succeeded(url: str) -> int:
    """Jobs that have succeeded in the database at ``url``."""
    return count(url, "SELECT COUNT(*) FROM later_jobs_index WHERE stage = 'success'")


def child_main(mode: str, args: list[str]) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from bench.tasks import noop

    if mode == "migrate":
        call_command("migrate", verbosity=0)
        return
    if mode == "enqueue_single":
        n = int(args[0])
        began = time.perf_counter()
        for _ in range(n):
            with transaction.atomic():
                noop.enqueue()
        print(f"{n / (time.perf_counter() - began):,.0f}")
        return
    if mode == "enqueue_in_atomic":
        print(enqueue_in_atomic(int(args[0]), noop))
        return
    if mode == "enqueue_autocommit":
        n = int(args[0])
        began = time.perf_counter()
        for _ in range(n):
            noop.enqueue()
        print(f"{n / (time.perf_counter() - began):,.0f}")
        return
    if mode == "wal_position":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_current_wal_lsn()")
            print(cursor.fetchone()[0])
        return
    if mode == "wal_since":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s)::bigint", [args[0]])
            print(cursor.fetchone()[0])
        return
    if mode == "round_trip":
        n = int(args[0])
        connection.ensure_connection()
        raw = connection.connection  # the driver's own connection
        began = time.perf_counter()
        for _ in range(n):
            raw.execute("SELECT 1").fetchall()
        print(f"{(time.perf_counter() - began) / n * 1e6:.0f} µs")
        return
    if mode == "floor":
        n = int(args[0])
        # A real (logged) table: a temporary one skips the WAL and its flush at commit.
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE bench_floor (id integer, value text)")
        raw = connection.connection  # the driver's own connection: no ORM, no Django cursor
        insert = "INSERT INTO bench_floor VALUES " + (
            "(?, ?)" if connection.vendor == "sqlite" else "(%s, %s)"
        )
        began = time.perf_counter()
        for i in range(n):
            with transaction.atomic():
                raw.execute(insert, (i, "x"))
        print(f"{n / (time.perf_counter() - began):,.0f}")
        with connection.cursor() as cursor:
            cursor.execute("DROP TABLE bench_floor")
        return
    if mode == "commit_ceiling":
        print(f"{commit_ceiling(int(args[0]), int(args[1])):,.0f}")
        return
    if mode == "bulk_floor":
        print(f"{bulk_floor(connection, int(args[0])):,.0f}")
        return
    if mode == "enqueue_bulk":
        n, batch = int(args[0]), 5000
        began = time.perf_counter()
        for start in range(0, n, batch):
            noop.enqueue_many([((), {})] * min(batch, n - start))
        print(f"{n / (time.perf_counter() - began):,.0f}")
        return
    if mode == "drain_rate":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT COUNT(*), MIN(started_at), MAX(finished_at) FROM later_jobs_index "
                "WHERE stage = 'success'"
            )
            count, first, last = cursor.fetchone()
        from later_django.db import from_db

        seconds = (from_db(last) - from_db(first)).total_seconds()
        print(f"{count / seconds:,.0f} ({count} jobs in {seconds:.2f}s)")
        return
    if mode == "latency":
        from later_django.tasks_api import default_task_backend

        n = int(args[0])
        ids = []
        for _ in range(n):
            ids.append(noop.enqueue().id)
            time.sleep(0.02)
        time.sleep(2)
        waits = []
        for job_id in ids:
            result = default_task_backend.get_result(job_id)
            waits.append((result.started_at - result.enqueued_at).total_seconds() * 1000)
        waits.sort()
        print(f"{statistics.median(waits):.1f} ms / {waits[int(len(waits) * 0.95)]:.1f} ms")
        return
    raise SystemExit(f"unknown mode {mode!r}")


def enqueue_in_atomic(n: int, task) -> str:
    """What ``task.enqueue()`` adds to a ``transaction.atomic()`` block that saves one model
    row, against what saving a second row adds. The three kinds of block take turns one
    by one, ``n`` of each, their order reversed every other turn, and each cost is the
    median of its blocks: the machine's drift over the run touches all three alike."""
    from django.contrib.auth.models import Group
    from django.db import transaction

    counter = iter(range(10**9))

    def one_row() -> None:
        with transaction.atomic():
            Group.objects.create(name=f"g{next(counter)}")

    def two_rows() -> None:
        with transaction.atomic():
            Group.objects.create(name=f"g{next(counter)}")
            Group.objects.create(name=f"g{next(counter)}")

    def row_and_enqueue() -> None:
        with transaction.atomic():
            Group.objects.create(name=f"g{next(counter)}")
            task.enqueue()

    blocks = (("one", one_row), ("two", two_rows), ("enqueue", row_and_enqueue))
    for _, block in blocks * 100:  # warm-up
        block()
    times: dict[str, list[float]] = {name: [] for name, _ in blocks}
    clock = time.perf_counter
    for turn in range(n):
        for name, block in blocks if turn % 2 else blocks[::-1]:
            began = clock()
            block()
            times[name].append(clock() - began)
    one, two, enqueue = (statistics.median(times[k]) * 1e6 for k in ("one", "two", "enqueue"))
    return (
        f"+{enqueue - one:.0f} µs for enqueue() vs +{two - one:.0f} µs for a second row "
        f"({(enqueue - one) / (two - one):.2f}x; one row alone {one:.0f} µs)"
    )


def commit_ceiling(threads: int, n: int) -> float:
    """Rows a second that ``threads`` threads commit, one row a transaction, each on a
    connection of its own, with no queue running: a drain whose jobs each commit one row
    cannot beat it on this machine with as many slots."""
    import threading

    from django.db import connection, connections

    with connection.cursor() as cursor:
        # The peers' benchmark body's table and row.
        cursor.execute(
            "CREATE TABLE bench_commits (seq integer NOT NULL, started_at double precision "
            "NOT NULL, done_at double precision NOT NULL DEFAULT extract(epoch FROM "
            "clock_timestamp()), pid integer NOT NULL)"
        )
    each = n // threads
    ready = threading.Barrier(threads + 1)

    def commit_rows() -> None:
        connection.ensure_connection()
        raw = connection.connection  # autocommit: each INSERT is its own transaction
        ready.wait()
        for seq in range(each):
            raw.execute(
                "INSERT INTO bench_commits (seq, started_at, pid) VALUES (%s, %s, %s)",
                (seq, time.time(), os.getpid()),
            ).close()
        connections.close_all()

    pool = [threading.Thread(target=commit_rows) for _ in range(threads)]
    for thread in pool:
        thread.start()
    ready.wait()
    began = time.perf_counter()
    for thread in pool:
        thread.join()
    rate = each * threads / (time.perf_counter() - began)
    with connection.cursor() as cursor:
        cursor.execute("DROP TABLE bench_commits")
    return rate


JOB_TABLES = ("later_storage", "later_jobs_index", "later_delivery_queue")


def bulk_floor(connection, n: int, batch: int = 5000) -> float:
    """Rows a second of the bulk figure's rows, built beforehand, written by the driver alone.

    Each job is a row in each of the three job tables. They go into copies of
    those tables with the same columns and indexes, but none of their
    triggers, so the figure is a ceiling for ``enqueue_many`` on this
    machine: PostgreSQL takes them by COPY, SQLite by ``executemany``, 5,000
    jobs a transaction as in the bulk figure.
    """
    from datetime import UTC, datetime

    from django.db import transaction
    from ulid_transform import ulid_now

    now = datetime.now(UTC)
    at = now.isoformat(" ") if connection.vendor == "sqlite" else now
    value = bytes(80)  # about a no-op job's encoded record
    ids = [ulid_now().lower() for _ in range(n)]
    index_columns = (
        "namespace, job_id, task_path, queue_name, priority, stage, revision, attempts, "
        "enqueued_at, run_at, transitioned_at"
    )
    queue_columns = "namespace, queue_name, job_id, priority, available_at, enqueued_at"
    rows = {
        "later_storage": ("namespace, key, value", [("bench", f"job:{i}", value) for i in ids]),
        "later_jobs_index": (
            index_columns,
            [
                ("bench", i, "bench.tasks.noop", "default", 0, "enqueued", 1, 0, at, at, at)
                for i in ids
            ],
        ),
        "later_delivery_queue": (queue_columns, [("bench", "default", i, 0, at, at) for i in ids]),
    }
    connection.ensure_connection()
    raw = connection.connection
    with connection.cursor() as cursor:
        for table in JOB_TABLES:
            _copy_table(cursor, connection.vendor, table, f"bench_{table}")
    began = time.perf_counter()
    for start in range(0, n, batch):
        with transaction.atomic():
            for table, (columns, all_rows) in rows.items():
                chunk = all_rows[start : start + batch]
                if connection.vendor == "sqlite":
                    marks = ", ".join("?" * len(chunk[0]))
                    insert = f"INSERT INTO bench_{table} ({columns}) VALUES ({marks})"
                    raw.executemany(insert, chunk)
                else:
                    with raw.cursor().copy(f"COPY bench_{table} ({columns}) FROM STDIN") as copy:
                        for row in chunk:
                            copy.write_row(row)
    rate = n / (time.perf_counter() - began)
    with connection.cursor() as cursor:
        for table in JOB_TABLES:
            cursor.execute(f"DROP TABLE bench_{table}")
    return rate


def _copy_table(cursor, vendor: str, table: str, copy: str) -> None:
    """Create ``copy`` with ``table``'s columns, defaults and indexes, without its triggers."""
    if vendor == "postgresql":
        cursor.execute(f"CREATE TABLE {copy} (LIKE {table} INCLUDING ALL)")
        return
    cursor.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE tbl_name = %s "
        "AND type IN ('table', 'index') AND sql IS NOT NULL ORDER BY type DESC",
        [table],
    )
    for kind, name, sql in cursor.fetchall():
        sql = sql.replace(f'"{table}"', f'"{copy}"', 1)
        if kind == "index":
            sql = sql.replace(f'"{name}"', f'"bench_{name}"', 1)
        cursor.execute(sql)


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--drain", type=int, default=20000)
    parser.add_argument("--memory", type=int, default=0, help="jobs for the memory run (0: skip)")


def each(kind: str, url: str, options: argparse.Namespace) -> None:
    print(f"== {kind}")
    for name, value in run(kind, url, options.drain, options.memory).items():
        print(f"{name:55} {value}")


def main() -> None:
    bench_main(__doc__ or "", child_main, add_options, each)


if __name__ == "__main__":
    main()
