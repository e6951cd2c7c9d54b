"""The soak's freeze mode: SIGSTOP a worker, time until others hold what it held."""

from __future__ import annotations

import argparse
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

from bench.common import bench_env

from .db import SoakDatabase
from .workers import SCRIPT, Workers, child, heartbeat_for, wait_until_finished


@dataclass
class FreezeReport:
    lease: float
    limit: float
    times: list[float] = field(default_factory=list)
    late: list[float] = field(default_factory=list)
    late_left: list[tuple[int, int]] = field(default_factory=list)  # jobs, partitions
    late_detail: list[str] = field(default_factory=list)  # the rows still held, each time
    logs: str = ""  # the workers' log folder
    held_write_lock: list[float] = field(default_factory=list)
    jobs_held: int = 0
    partitions_held: int = 0
    lost: int = 0
    duplicates: int = 0

    @property
    def ok(self) -> bool:
        return not self.late and self.lost == 0

    def rows(self) -> dict[str, str]:
        times = sorted(self.times)

        def pick(q: float) -> str:
            return f"{times[min(len(times) - 1, int(len(times) * q))]:.1f}" if times else "-"

        return {
            "freezes (SIGSTOP, SIGCONT once taken over)": str(len(times)),
            "frozen workers' jobs / partitions with a head": (
                f"{self.jobs_held} / {self.partitions_held}"
            ),
            "takeover p50 / p95 / max": f"{pick(0.5)} / {pick(0.95)} / {pick(1.0)} s",
            "lease": f"{self.lease:g} s",
            f"not taken over within {self.limit:g} s": (
                str(len(self.late))
                + "".join(
                    f"; {t:.1f} s, still held {j} job(s), {p} partition(s)"
                    for t, (j, p) in zip(self.late, self.late_left, strict=True)
                )
            ),
            "more freezes, caught holding SQLite's write lock": (
                f"{len(self.held_write_lock)} (taken over within the limit: "
                f"{sum(t <= self.limit for t in self.held_write_lock)})"
            ),
            "lost": str(self.lost),
            "duplicate runs (frozen runs resumed)": str(self.duplicates),
            "rows still held by late freezes": " | ".join(self.late_detail) or "-",
            "worker logs": self.logs,
        }


def freeze(
    url: str, options: argparse.Namespace, *, outside_write_lock: bool = False
) -> FreezeReport:
    """Freeze workers ``options.freeze`` times and time the takeover of what each held.

    With ``outside_write_lock`` a freeze that catches a SQLite worker holding
    the write lock is undone and tried again, to measure what can be bounded.
    """
    child("setup", url)
    lease = options.lease
    report = FreezeReport(lease=lease, limit=lease + heartbeat_for(lease) + 3)
    db = SoakDatabase(url)
    low = options.workers * options.concurrency * 2
    feeder = subprocess.Popen(
        [sys.executable, SCRIPT, "--child", "feed", str(low), str(options.keys)],
        env=bench_env(url),
        stdin=subprocess.DEVNULL,
    )
    workers = Workers(url, options.concurrency, lease)
    report.logs = str(workers.logs)
    try:
        for _ in range(options.workers):
            workers.start()
        while db.finished() < low:
            time.sleep(0.2)
        while len(report.times) + len(report.held_write_lock) < options.freeze:
            time.sleep(random.uniform(0.2, 1.5))
            proc = random.choice(workers.procs)
            worker_id = db.worker_id(proc.pid)
            if worker_id is None:
                continue
            proc.send_signal(signal.SIGSTOP)
            stopped_at = time.monotonic()
            jobs, partitions = db.held(worker_id)
            locked = db.sqlite and db.holds_write_lock(proc.pid)
            if (not jobs and not partitions) or (locked and outside_write_lock):
                proc.send_signal(signal.SIGCONT)
                continue
            # Frozen with SQLite's write lock, it holds every writer up until it
            # wakes: wait only long enough to see nothing move.
            wait = report.limit + (2 if locked else 30)
            while db.held(worker_id) != (0, 0) and time.monotonic() - stopped_at < wait:
                time.sleep(0.05)
            took = time.monotonic() - stopped_at
            left = db.held(worker_id)
            detail = db.held_detail(worker_id) if left != (0, 0) else ""
            proc.send_signal(signal.SIGCONT)
            if locked:
                report.held_write_lock.append(took)
                continue
            report.times.append(took)
            report.jobs_held += jobs
            report.partitions_held += partitions
            if took > report.limit:
                report.late.append(took)
                report.late_left.append(left)
                report.late_detail.append(detail)
    finally:
        feeder.terminate()
        feeder.wait(timeout=60)
    try:
        wait_until_finished(db, lease)
    finally:
        workers.stop()
    counts = db.counts()
    report.lost = counts.lost
    report.duplicates = counts.runs - counts.jobs_run
    return report
