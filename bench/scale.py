"""What a large backlog costs the claim, the enqueue and the dashboard overview.

    .venv/bin/python bench/scale.py [--db sqlite|postgres|both] [--small 10000]
                                    [--queued 1000000]

Each database is created fresh and dropped afterwards. It is filled with
``--small`` queued no-op jobs by ``enqueue_many`` (5,000 a call, real rows in
every job table), analysed as autovacuum would, and timed; then filled up to
``--queued`` jobs and timed again. Each figure is the median of 50 runs:

* a claim of one job (``free=1``) and of a batch (``free=48``) by a worker,
  as ``later_worker`` claims (the claimed jobs stay leased);
* one ``enqueue()`` in its own ``transaction.atomic()`` block;
* the overview's reads (stage counts, throughput, waits, queue charts,
  workers, database size), without the template.

The target is a cost at ``--queued`` of at most 1.5x the cost at ``--small``.
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

REPEAT = 50
CHUNK = 5000
OWNER = "bench-host:1:abcdef"


def median_ms(action) -> float:
    seconds = []
    for _ in range(REPEAT):
        began = time.perf_counter()
        action()
        seconds.append(time.perf_counter() - began)
    return statistics.median(seconds) * 1000


def child_main(mode: str, args: list[str]) -> None:
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    from bench.tasks import noop

    if mode == "fill":
        call_command("migrate", verbosity=0)
        want = int(args[0])
        with connection.cursor() as cursor:
            cursor.execute("SELECT COUNT(*) FROM later_delivery_queue")
            have = cursor.fetchone()[0]
        while have < want:
            batch = min(CHUNK, want - have)
            noop.enqueue_many([((), {})] * batch)
            have += batch
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE" if connection.vendor == "postgresql" else "ANALYZE")
        print(have)
        return
    if mode == "times":
        from django.utils import timezone

        from later_django.dashboard import overview
        from later_django.dashboard.scope import configured_scopes
        from later_django.engine.claiming import BATCH, claim

        scope = configured_scopes()[0]

        def claim_one() -> None:
            assert claim("bench", OWNER, queues=None, free=1, lease_seconds=300, using="default")

        def claim_batch() -> None:
            claimed = claim(
                "bench", OWNER, queues=None, free=BATCH, lease_seconds=300, using="default"
            )
            assert len(claimed) == BATCH, len(claimed)

        def enqueue_one() -> None:
            with transaction.atomic():
                noop.enqueue()

        def overview_reads() -> None:
            now = timezone.now()
            overview.stage_counts(scope)
            overview.throughput(scope, now)
            overview.wait_figures(scope, now)
            overview.queue_week(scope, now)
            overview.queue_hour(scope, now)
            overview.workers(scope, now)
            overview.database_size(scope)

        for name, action in [
            ("claim, one job", claim_one),
            (f"claim, a batch of {BATCH}", claim_batch),
            ("enqueue, one job in transaction.atomic()", enqueue_one),
            ("dashboard overview reads", overview_reads),
        ]:
            print(f"{name}\t{median_ms(action):.3f}")
        return
    raise SystemExit(f"unknown mode {mode!r}")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--small", type=int, default=10_000)
    parser.add_argument("--queued", type=int, default=1_000_000)


def times(url: str) -> dict[str, float]:
    lines = run_child(__file__, "times", url).splitlines()
    return {name: float(ms) for name, ms in (line.split("\t") for line in lines)}


def each(kind: str, url: str, options: argparse.Namespace) -> None:
    figures = []
    for size in (options.small, options.queued):
        began = time.monotonic()
        run_child(__file__, "fill", url, str(size))
        print(f"{kind}: {size:,} queued jobs, filled in {time.monotonic() - began:.0f} s")
        figures.append(times(url))
    small, large = figures
    print(f"\n== {kind}: median ms of {REPEAT} runs")
    print(f"| figure | {options.small:,} queued | {options.queued:,} queued | ratio |")
    print("|---|---:|---:|---:|")
    for name in small:
        ratio = large[name] / small[name]
        print(f"| {name} | {small[name]:.2f} | {large[name]:.2f} | {ratio:.2f}x |")
    print()


def main() -> None:
    bench_main(__doc__ or "", child_main, add_options, each)


if __name__ == "__main__":
    main()
