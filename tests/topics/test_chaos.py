"""Ordered jobs survive killed and paused workers: nothing lost, order kept, stale writes fenced."""

from __future__ import annotations

import signal
from collections import defaultdict

import pytest
from django.db import connection

from later_django.models import JobIndexRow, PartitionHead, PartitionJob, PartitionLease
from later_django.results import load_record
from tests.conftest import pause_outside_a_transaction, stop_before_its_statement_ends, wait_for
from tests.models import Execution
from tests.topics import tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

KEYS = 40
PER_KEY = 50


def finished() -> int:
    return JobIndexRow.objects.filter(stage__in=["success", "failed"]).count()


@pytest.mark.soak
def test_ordered_jobs_survive_a_worker_killed_mid_run_and_restarted(start_worker):
    keys = [f"customer-{i}" for i in range(KEYS)]
    for key in keys:
        tasks.chaos_step.using(partition_key=key).enqueue_many(
            [((key, n), {}) for n in range(PER_KEY)]
        )
    total = KEYS * PER_KEY
    workers = [start_worker("--concurrency", "4") for _ in range(3)]
    wait_for(lambda: finished() >= total // 3, timeout=180)
    workers[0].signal(signal.SIGKILL)
    workers[0].wait(timeout=10)
    wait_for(lambda: finished() >= total // 2, timeout=180)
    workers.append(start_worker("--concurrency", "4"))  # the killed worker, restarted
    wait_for(lambda: finished() >= total, timeout=300)

    assert JobIndexRow.objects.filter(stage="success").count() == total
    seen: dict[str, list[int]] = defaultdict(list)
    for kind, value in Execution.objects.order_by("id").values_list("kind", "value"):
        seen[kind.removeprefix("chaos:")].append(int(value))
    for key in keys:
        firsts = list(dict.fromkeys(seen[key]))  # first execution of each number, in order
        assert firsts == list(range(PER_KEY)), key
    reruns = sum(len(v) for v in seen.values()) - total
    # Only jobs running on the killed worker can run twice: at most its claimed batch.
    assert reruns <= 8, reruns
    assert not PartitionJob.objects.exists()
    assert not PartitionHead.objects.exists()


def test_a_paused_worker_whose_partition_was_taken_over_cannot_complete_its_head(start_worker):
    key = "fence"
    slow = tasks.slow_fenced_write.using(partition_key=key).enqueue(key, 3)
    after = [tasks.step.using(partition_key=key).enqueue(key, n) for n in (1, 2)]
    paused = start_worker("--concurrency", "2")
    wait_for(lambda: Execution.objects.filter(kind=f"begun:{key}").exists(), timeout=30)
    # On SQLite a worker stopped in a write transaction would hold the one write lock
    # and stall the taker until it woke (docs/worker.md): stop it between transactions.
    pause_outside_a_transaction(paused)
    try:
        taker = start_worker("--concurrency", "2")
        wait_for(lambda: Execution.objects.filter(kind=f"step:{key}").count() == 2, timeout=60)
    finally:
        paused.signal(signal.SIGCONT)
    wait_for(lambda: "fenced: job id=" + slow.id in paused.output(), timeout=30)

    begun = Execution.objects.filter(kind=f"begun:{key}").order_by("id")
    assert [(e.pid, e.value) for e in begun] == [(paused.pid, "1"), (taker.pid, "2")]
    # The handler fenced its own late write with the epoch from its context...
    wrote = {e.pid: e.value for e in Execution.objects.filter(kind=f"wrote:{key}")}
    wait_for(lambda: Execution.objects.filter(kind=f"wrote:{key}").count() == 2, timeout=10)
    wrote = {e.pid: e.value for e in Execution.objects.filter(kind=f"wrote:{key}")}
    assert wrote == {taker.pid: "2:1", paused.pid: "1:0"}
    assert list(Execution.objects.filter(kind=f"fenced:{key}").values_list("value", flat=True)) == [
        "2"
    ]
    # ...and the worker could not complete the head: the taker's run is the stored one.
    slow.refresh()
    assert slow.status == "SUCCESSFUL"
    assert slow.return_value == 2
    record = load_record("tests", slow.id, using="default")[1]
    assert [a.outcome for a in record.attempts] == ["lost", "success"]
    assert [int(e.value) for e in Execution.objects.filter(kind=f"step:{key}").order_by("id")] == [
        1,
        2,
    ]
    for result in after:
        result.refresh()
        assert result.status == "SUCCESSFUL"
    assert PartitionLease.objects.get().epoch == 4
    assert not PartitionHead.objects.exists()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL only: row locks")
def test_a_worker_frozen_while_renewing_its_partition_lease_does_not_keep_it(start_worker):
    """Stopped inside the renewal's transaction, a worker kept the head row locked for good,
    and claims (which skip locked heads) never took the partition over."""
    key = "frozen"
    first = tasks.long_first_run.using(partition_key=key).enqueue(key, 120)
    then = tasks.step.using(partition_key=key).enqueue(key, 1)
    frozen = start_worker("--concurrency", "2")
    wait_for(lambda: Execution.objects.filter(kind=f"run:{key}").exists(), timeout=30)

    # The renewal runs twice a second and lasts milliseconds: it is stopped between its
    # two statements, the head's row locked by the first, the lease's by the second.
    stop_before_its_statement_ends(
        frozen, "later_partition_lease", "UPDATE later_partition_lease SET expires_at"
    )
    try:
        start_worker("--concurrency", "2")
        wait_for(lambda: (then.refresh(), then.status)[1] == "SUCCESSFUL", timeout=30)
    finally:
        frozen.signal(signal.SIGCONT)
    first.refresh()
    assert (first.status, first.return_value) == ("SUCCESSFUL", 2)
