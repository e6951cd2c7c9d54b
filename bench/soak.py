"""Reliability under load: workers killed, a database server restarted, workers frozen.

    .venv/bin/python bench/soak.py [--db sqlite|postgres|both] [--plain 100000] [--ordered 20000]
                                   [--keys 200] [--workers 3] [--concurrency 4] [--kill-every 10]
                                   [--lease 30] [--short] [--restart-postgres] [--freeze N]
                                   [--atomic] [--kills N]

Each database is created fresh and dropped afterwards. The soak enqueues
``--plain`` ordinary jobs and ``--ordered`` jobs of the 16-partition topic
``bench`` (``--keys`` partition keys, each key's jobs numbered in order),
starts ``--workers`` ``later_worker`` processes and, every ``--kill-every``
seconds, SIGKILLs one at random and starts another in its place, until every
job has finished. Each run of a job writes a row (key, number, pid, start and
end time) into a table of the soak's own, from which it counts:

* lost: enqueued jobs that did not succeed, or succeeded without a run;
* duplicates: runs beyond one per job (a killed worker's jobs that had run
  but whose outcome was not yet stored run again elsewhere);
* order violations: a job of a key that started before a run of an earlier
  job of that key ended, or after a later job of that key started.

It exits 1 when a job was lost, the order was broken, or there were more
duplicates than kills x ``--concurrency`` (a server restart counting as a
kill of every worker). ``--short`` is a run for CI (3,000
plain and 600 ordered jobs, a kill every 2 s). ``--restart-postgres`` restarts
the PostgreSQL server once, when half the jobs are done, with ``pg_ctlcluster
--skip-systemctl-redirect VERSION main restart`` (``LATER_PG_CLUSTER`` names
another cluster than ``main``): the workers must recover on their own.

``--kills N`` kills by progress instead of by the clock: one worker as each
1/(N+1) of the jobs has finished, so a run sees its N kills however fast the
machine drains it (the CI tests use it).

``--atomic`` runs the same jobs as atomic tasks (``@task(atomic=True)``,
docs/exactly-once.md): each run's row is written in the transaction that
stores its outcome, so a run cut off by a kill leaves no row and the row
count is the count of effects. Its limit for duplicates is 0; it also
prints how many attempts went beyond each job's first (jobs a killed worker
had claimed, running or waiting for a slot, and that ran again elsewhere).

``--freeze N`` measures instead how fast a frozen worker's work moves on:
while a feeder keeps a few seconds of 0.2-second jobs queued, it SIGSTOPs a
random worker N times at random moments, times until other workers hold
every job it held and every partition it leased that has a head, then sends
SIGCONT. It prints the takeover times and the freezes not taken over within
the lease + a heartbeat + 3 s (exit 1 if any). On SQLite a worker stopped
while it holds the database's write lock (in one of its own transactions, or
in a task's write) holds every writer up until it wakes, and nothing can be
taken over meanwhile: such freezes are counted apart (read from
``/proc/locks``), held for the limit + 2 s and not counted as failures, since
that is SQLite's single-writer design (see docs/worker.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import bench_main  # noqa: E402
from bench.soaking.db import SoakDatabase, order_violations  # noqa: E402
from bench.soaking.freeze import FreezeReport, freeze  # noqa: E402
from bench.soaking.workers import (  # noqa: E402
    Workers,
    child,
    restart_postgres,
    stall_seconds,
)

failures: list[str] = []


@dataclass
class SoakReport:
    jobs: int
    workers: int
    concurrency: int
    lease: float
    kills: int = 0
    lost: int = 0
    failed: int = 0
    duplicates: int = 0
    most_after_one_kill: int = 0
    order_violations: int = 0
    elapsed: float = 0.0
    stalled: bool = False
    restart_seconds: float | None = None
    atomic: bool = False
    runs_started_again: int = 0
    logs: str = ""
    stuck: list[str] = field(default_factory=list)  # the unfinished jobs, at a stall

    @property
    def ok(self) -> bool:
        return (
            not self.stalled
            and self.lost == 0
            and self.order_violations == 0
            and self.duplicates <= self.duplicate_limit
        )

    @property
    def duplicate_limit(self) -> int:
        """Runs whose outcome a killed worker had not stored: at most one per thread.

        A server restart ends every worker's sessions, as if each were killed.
        Atomic jobs store each run's row with its outcome, so none may repeat.
        """
        if self.atomic:
            return 0
        restarts = self.workers if self.restart_seconds is not None else 0
        return (self.kills + restarts) * self.concurrency

    def rows(self) -> dict[str, str]:
        rows = {
            "jobs (plain + ordered)": f"{self.jobs:,}",
            "kills (SIGKILL, then a new worker)": str(self.kills),
            "lost": str(self.lost),
            "  of them failed": str(self.failed),
            (
                "duplicate effects (atomic tasks; limit 0)"
                if self.atomic
                else "duplicate runs (limit: kills x concurrency)"
            ): f"{self.duplicates} (limit {self.duplicate_limit})",
            "  most after one kill": str(self.most_after_one_kill),
            "order violations": str(self.order_violations),
            "elapsed": f"{self.elapsed:.1f} s",
            "jobs/s": f"{self.jobs / self.elapsed:,.0f}" if self.elapsed else "-",
        }
        if self.atomic:
            rows["  jobs claimed again (attempts beyond the first)"] = str(self.runs_started_again)
        if self.restart_seconds is not None:
            rows["PostgreSQL restart (pg_ctlcluster)"] = f"{self.restart_seconds:.1f} s"
        if self.stalled:
            rows["STALLED: no job finished for"] = f"{stall_seconds(self.lease):.0f} s"
            for number, line in enumerate(self.stuck, 1):
                rows[f"  unfinished job {number}"] = line
        rows["worker logs"] = self.logs
        return rows


def soak(url: str, options: argparse.Namespace) -> SoakReport:
    """Enqueue, run workers under kills (and a restart), wait for the end, count."""
    child("setup", url)
    kind = "atomic" if options.atomic else "plain"
    child("enqueue", url, str(options.plain), str(options.ordered), str(options.keys), kind)
    db = SoakDatabase(url)
    report = SoakReport(
        jobs=options.plain + options.ordered,
        workers=options.workers,
        concurrency=options.concurrency,
        lease=options.lease,
        atomic=options.atomic,
    )
    workers = Workers(url, options.concurrency, options.lease)
    report.logs = str(workers.logs)
    restart_pending = options.restart_postgres
    began = time.monotonic()
    try:
        for _ in range(options.workers):
            workers.start()
        next_kill = began + options.kill_every
        progress_at, best = began, report.jobs
        while (unfinished := db.unfinished()) > 0:
            now = time.monotonic()
            if unfinished < best:
                progress_at, best = now, unfinished
            elif now - progress_at > stall_seconds(options.lease):
                report.stalled = True
                report.stuck = [
                    f"{job_id}: {rows}"
                    + "".join(f"\n      {said}" for said in said_of(workers.logs, job_id))
                    for job_id, rows in db.stuck()
                ]
                break
            if restart_pending and unfinished <= report.jobs // 2:
                restart_pending = False
                report.restart_seconds = restart_postgres()
            if options.kills:
                # The next kill's share of the jobs done: 1/(N+1), 2/(N+1), ...
                due = (
                    report.kills < options.kills
                    and (report.jobs - unfinished) * (options.kills + 1)
                    >= (report.kills + 1) * report.jobs
                )
            else:
                due = now >= next_kill
            if due:
                workers.kill_one()
                report.kills += 1
                next_kill = now + options.kill_every
            # Often enough, when killing by progress, to see each share of a fast run.
            time.sleep(0.05 if options.kills else 0.25)
        report.elapsed = time.monotonic() - began
    finally:
        workers.stop()
    counts = db.counts()
    report.lost, report.failed = counts.lost, counts.failed
    report.duplicates = counts.runs - counts.jobs_run
    report.most_after_one_kill = db.most_runs_again_after_one_kill()
    report.runs_started_again = db.runs_started_again()
    report.order_violations = order_violations(db.ordered_runs())
    return report


def said_of(logs: Path, job_id: str, most: int = 4) -> list[str]:
    """The last lines the workers logged about a job (outcomes other than success)."""
    lines = [
        f"{path.name}: {line.strip()[:200]}"
        for path in sorted(logs.glob("*.log"))
        for line in path.read_text(errors="replace").splitlines()
        if job_id in line
    ]
    return lines[-most:]


def child_main(mode: str, args: list[str]) -> None:
    import django

    django.setup()
    from bench.soaking import feed

    if mode == "setup":
        feed.setup()
    elif mode == "enqueue":
        feed.enqueue(int(args[0]), int(args[1]), int(args[2]), atomic=args[3] == "atomic")
    elif mode == "feed":
        feed.feed(low=int(args[0]), keys=int(args[1]))
    else:
        raise SystemExit(f"unknown mode {mode!r}")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--plain", type=int, help="ordinary jobs (100,000)")
    parser.add_argument("--ordered", type=int, help="jobs of topic 'bench' (20,000)")
    parser.add_argument("--keys", type=int, help="partition keys of ordered jobs (200)")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--kill-every", type=float, help="seconds between kills (10)")
    parser.add_argument("--lease", type=float, default=30.0, help="the backend's lease_seconds")
    parser.add_argument(
        "--short", action="store_true", help="3,000 plain + 600 ordered jobs, a kill every 2 s"
    )
    parser.add_argument(
        "--kills", type=int, default=0, metavar="N", help="N kills spread over the jobs' progress"
    )
    parser.add_argument("--restart-postgres", action="store_true")
    parser.add_argument("--freeze", type=int, default=0, metavar="N", help="freeze mode")
    parser.add_argument(
        "--atomic", action="store_true", help="atomic tasks: every run's effect exactly once"
    )


def parse_options(argv: list[str]) -> argparse.Namespace:
    """The options of a run, as the command line gives them (for callers in Python)."""
    parser = argparse.ArgumentParser()
    add_options(parser)
    return shorten(parser.parse_args(argv))


def shorten(options: argparse.Namespace) -> argparse.Namespace:
    """Fill in the sizes not given: the full run's, or with ``--short`` the CI run's."""
    defaults = (3000, 600, 30, 2.0) if options.short else (100_000, 20_000, 200, 10.0)
    for name, default in zip(("plain", "ordered", "keys", "kill_every"), defaults, strict=True):
        if getattr(options, name) is None:
            setattr(options, name, default)
    return options


def each(kind: str, url: str, options: argparse.Namespace) -> None:
    options = shorten(options)
    print(f"== {kind}", flush=True)
    report: SoakReport | FreezeReport
    if options.freeze:
        report = freeze(url, options)
    else:
        if options.restart_postgres and kind != "postgres":
            print("(--restart-postgres applies to PostgreSQL only)")
        options_here = argparse.Namespace(**vars(options))
        options_here.restart_postgres = options.restart_postgres and kind == "postgres"
        report = soak(url, options_here)
    for name, value in report.rows().items():
        print(f"{name:50} {value}", flush=True)
    if not report.ok:
        failures.append(kind)
        if isinstance(report, SoakReport):
            print(f"FAILED; worker logs in {report.logs}", flush=True)


def main() -> None:
    bench_main(__doc__ or "", child_main, add_options, each)
    if failures:
        raise SystemExit(f"failed on {', '.join(failures)}")


if __name__ == "__main__":
    main()
