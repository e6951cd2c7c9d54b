"""What the soak reads from its database, through the driver alone (no Django in the parent).

Every read opens a connection of its own, and a read that fails to connect
is tried again for two minutes, so the parent outlives a server restart.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections import defaultdict
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAMESPACE = "bench"
UNFINISHED = ("enqueued", "delayed", "waiting", "requeued", "running")


@dataclass(frozen=True)
class Counts:
    lost: int
    failed: int
    runs: int
    jobs_run: int


class SoakDatabase:
    def __init__(self, url: str) -> None:
        self.url = url
        self.sqlite = url.startswith("sqlite:///")

    def rows(self, sql: str, params: Iterable[Any] = ()) -> list[tuple]:
        deadline = time.monotonic() + 120
        while True:
            try:
                return self._rows(sql, list(params))
            except Exception as e:
                if time.monotonic() > deadline or not _is_outage(e):
                    raise
                time.sleep(0.5)

    def _rows(self, sql: str, params: list[Any]) -> list[tuple]:
        if self.sqlite:
            path = self.url.removeprefix("sqlite:///")
            with closing(sqlite3.connect(path, timeout=30)) as conn:
                return conn.execute(sql.replace("%s", "?"), params).fetchall()
        import psycopg

        with psycopg.connect(self.url, autocommit=True, connect_timeout=5) as conn:
            return conn.execute(sql, params).fetchall()

    def unfinished(self) -> int:
        marks = ", ".join(["%s"] * len(UNFINISHED))
        [(count,)] = self.rows(
            f"SELECT COUNT(*) FROM later_jobs_index WHERE namespace = %s AND stage IN ({marks})",
            [NAMESPACE, *UNFINISHED],
        )
        return count

    def stuck(self, most: int = 10) -> list[tuple[str, str]]:
        """What the database holds for (at most ``most``) unfinished jobs, for a stall: each
        job's id, and a line of its rows."""
        marks = ", ".join(["%s"] * len(UNFINISHED))
        found = self.rows(
            "SELECT i.job_id, i.stage, i.attempts, i.worker_id, e.owner, e.epoch, "
            'e.lease_expires_at, q.lease_owner, q.available_at, h.topic, h."partition" '
            "FROM later_jobs_index i "
            "LEFT JOIN later_job_execution e ON e.namespace = i.namespace AND e.job_id = i.job_id "
            "LEFT JOIN later_delivery_queue q ON q.namespace = i.namespace AND q.job_id = i.job_id "
            "LEFT JOIN later_partition_head h ON h.namespace = i.namespace AND h.job_id = i.job_id "
            f"WHERE i.namespace = %s AND i.stage IN ({marks}) ORDER BY i.job_id LIMIT %s",
            [NAMESPACE, *UNFINISHED, most],
        )
        names = (
            "stage", "attempts", "index worker", "execution owner", "epoch", "lease expires",
            "queue lease owner", "available at", "topic", "partition",
        )  # fmt: skip
        return [
            (row[0], ", ".join(f"{n}={v}" for n, v in zip(names, row[1:], strict=True)))
            for row in found
        ]

    def finished(self) -> int:
        [(count,)] = self.rows("SELECT COUNT(*) FROM bench_soak_run")
        return count

    def counts(self) -> Counts:
        [(lost,)] = self.rows(
            "SELECT COUNT(*) FROM bench_soak_job j WHERE NOT EXISTS (SELECT 1 FROM "
            "later_jobs_index i WHERE i.namespace = %s AND i.job_id = j.job_id "
            "AND i.stage = 'success') OR NOT EXISTS (SELECT 1 FROM bench_soak_run r "
            "WHERE r.key = j.key AND r.n = j.n)",
            [NAMESPACE],
        )
        [(failed,)] = self.rows(
            "SELECT COUNT(*) FROM later_jobs_index WHERE namespace = %s AND stage = 'failed'",
            [NAMESPACE],
        )
        [(runs,)] = self.rows("SELECT COUNT(*) FROM bench_soak_run")
        [(jobs_run,)] = self.rows(
            "SELECT COUNT(*) FROM (SELECT DISTINCT key, n FROM bench_soak_run) AS d"
        )
        return Counts(lost=lost, failed=failed, runs=runs, jobs_run=jobs_run)

    def runs_started_again(self) -> int:
        """Attempts beyond each job's first: jobs a killed worker had claimed (running, or
        waiting for a slot) and that another worker claimed again."""
        [(again,)] = self.rows(
            "SELECT COALESCE(SUM(attempts), 0) - COUNT(*) FROM later_jobs_index "
            "WHERE namespace = %s",
            [NAMESPACE],
        )
        return again

    def most_runs_again_after_one_kill(self) -> int:
        """The most jobs run again whose first run was in one process (the killed one)."""
        found = self.rows(
            "SELECT COUNT(*) FROM bench_soak_run r WHERE NOT EXISTS (SELECT 1 FROM "
            "bench_soak_run e WHERE e.key = r.key AND e.n = r.n AND e.started < r.started) "
            "AND EXISTS (SELECT 1 FROM bench_soak_run o WHERE o.key = r.key AND o.n = r.n "
            "AND o.id <> r.id) GROUP BY r.pid ORDER BY COUNT(*) DESC LIMIT 1"
        )
        return found[0][0] if found else 0

    def ordered_runs(self) -> list[tuple[str, int, float, float]]:
        return self.rows(
            "SELECT key, n, started, finished FROM bench_soak_run WHERE key <> '' "
            "ORDER BY key, started"
        )

    def worker_id(self, pid: int) -> str | None:
        """The id of the live worker process ``pid`` (ids are ``host:pid:random``)."""
        found = self.rows(
            "SELECT worker_id FROM later_worker WHERE namespace = %s AND worker_id LIKE %s",
            [NAMESPACE, f"%:{pid}:%"],
        )
        return found[0][0] if found else None

    def held_detail(self, worker_id: str) -> str:
        """What ``held`` counts, row by row: for a freeze never taken over."""
        jobs = self.rows(
            "SELECT e.job_id, e.epoch, e.lease_expires_at, i.stage, d.lease_owner, d.available_at "
            "FROM later_job_execution e LEFT JOIN later_jobs_index i ON i.namespace = "
            "e.namespace AND i.job_id = e.job_id LEFT JOIN later_delivery_queue d ON "
            "d.namespace = e.namespace AND d.job_id = e.job_id "
            "WHERE e.namespace = %s AND e.owner = %s",
            [NAMESPACE, worker_id],
        )
        partitions = self.rows(
            'SELECT l.topic, l."partition", l.epoch, l.expires_at, h.job_id, h.available_at, '
            "i.stage FROM later_partition_lease l JOIN later_partition_head h ON "
            'h.namespace = l.namespace AND h.topic = l.topic AND h."partition" = l."partition" '
            "LEFT JOIN later_jobs_index i ON i.namespace = h.namespace AND i.job_id = h.job_id "
            "WHERE l.namespace = %s AND l.owner = %s",
            [NAMESPACE, worker_id],
        )
        detail = f"jobs {jobs}; partitions {partitions}"
        if not self.sqlite:
            # Sessions in a transaction for over a second: what may hold those rows' locks
            # (a frozen worker's session ends once its transaction idles for a lease).
            long = self.rows(
                "SELECT pid, state, wait_event_type, wait_event, "
                "round(extract(epoch FROM now() - xact_start)::numeric, 1), "
                "pg_blocking_pids(pid), left(query, 100) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                "AND xact_start < now() - interval '1 second' ORDER BY xact_start"
            )
            detail += f"; transactions over 1 s {long}"
        return detail

    def held(self, worker_id: str) -> tuple[int, int]:
        """Jobs leased to ``worker_id``, and partitions it leases that have a head to run."""
        [(jobs,)] = self.rows(
            "SELECT COUNT(*) FROM later_job_execution WHERE namespace = %s AND owner = %s",
            [NAMESPACE, worker_id],
        )
        [(partitions,)] = self.rows(
            "SELECT COUNT(*) FROM later_partition_lease l WHERE l.namespace = %s "
            "AND l.owner = %s AND EXISTS (SELECT 1 FROM later_partition_head h WHERE "
            'h.namespace = l.namespace AND h.topic = l.topic AND h."partition" = l."partition")',
            [NAMESPACE, worker_id],
        )
        return jobs, partitions

    def holds_write_lock(self, pid: int) -> bool:
        """SQLite in WAL mode: whether process ``pid`` holds the database's write lock.

        That lock is a POSIX lock on byte 120 of the ``-shm`` file, which Linux
        lists, with its owner, in ``/proc/locks``.
        """
        path = self.url.removeprefix("sqlite:///")
        try:
            inode = os.stat(f"{path}-shm").st_ino
        except FileNotFoundError:
            return False
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if fields[1:2] == ["->"]:
                continue  # a waiter, not a holder
            if (
                fields[3:5] == ["WRITE", str(pid)]
                and fields[5].endswith(f":{inode}")
                and fields[6] == "120"
            ):
                return True
        return False


def _is_outage(error: Exception) -> bool:
    if isinstance(error, sqlite3.OperationalError):
        return "locked" in str(error)
    import psycopg

    return isinstance(error, psycopg.OperationalError)


def order_violations(runs: Iterable[tuple[str, int, float, float]]) -> int:
    """Count runs of ordered jobs that broke their key's order.

    ``runs`` are (key, number, started, finished), sorted by key and start. A
    run breaks the order when it starts before a run of another job of its
    key has finished, or when a job with a higher number of its key started
    before it (a job run again after its successor began counts too).
    """
    by_key: dict[str, list[tuple[int, float, float]]] = defaultdict(list)
    for key, n, started, finished in runs:
        by_key[key].append((n, started, finished))
    violations = 0
    for key_runs in by_key.values():
        highest = -1
        open_runs: list[tuple[int, float, float]] = []
        for n, started, finished in key_runs:
            open_runs = [r for r in open_runs if r[2] > started]
            if n < highest or any(r[0] != n for r in open_runs):
                violations += 1
            highest = max(highest, n)
            open_runs.append((n, started, finished))
    return violations
