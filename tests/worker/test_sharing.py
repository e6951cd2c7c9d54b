"""Workers share long jobs: none holds claimed jobs that another worker's idle threads could run."""

import signal
import time
from collections import Counter

import pytest

from later_django.models import JobIndexRow
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def started(kind: str) -> int:
    return Execution.objects.filter(kind=f"{kind}:start").count()


def release(gate: str) -> None:
    Execution.objects.create(kind=gate, value="", pid=0, at=time.time())


def test_a_second_worker_runs_long_jobs_the_first_has_no_free_thread_for(start_worker):
    tasks.runs_until_released.enqueue_many([(("long", str(i), "go"), {}) for i in range(4)])
    first = start_worker("--burst", "--concurrency", "2")
    wait_for(lambda: started("long") == 2)
    # A worker that has not yet seen how long its jobs take holds only what its
    # threads can start: the two jobs it has no thread for are left to the second
    # worker, which starts them while the first two still run.
    second = start_worker("--burst", "--concurrency", "2")
    wait_for(lambda: started("long") == 4, timeout=60)
    release("go")
    for worker in (first, second):
        assert worker.wait(timeout=60) == 0, worker.output()

    by_pid = Counter(Execution.objects.filter(kind="long").values_list("pid", flat=True))
    assert by_pid == {first.pid: 2, second.pid: 2}, (first.output(), second.output())


def test_jobs_held_behind_long_ones_go_back_to_the_queue_for_another_worker(start_worker):
    first = start_worker("--concurrency", "2")
    # A run of short jobs: the worker learns its jobs are short and holds a reserve.
    tasks.noop.enqueue_many([((), {})] * 40)

    def drained(count: int):
        def done() -> bool:
            return JobIndexRow.objects.filter(stage="success").count() == count

        return done

    wait_for(drained(40))
    tasks.runs_until_released.enqueue_many([(("long", str(i), "go"), {}) for i in range(2)])
    tasks.record.enqueue_many([(("short", str(i)), {}) for i in range(6)])

    def all_claimed() -> bool:
        """the first worker holds every job: two running, six waiting for a thread"""
        return not JobIndexRow.objects.filter(stage="enqueued").exists()

    wait_for(all_claimed)
    second = start_worker("--concurrency", "2")

    def shorts_ran() -> bool:
        """the six short jobs have run"""
        return Execution.objects.filter(kind="short").count() == 6

    wait_for(shorts_ran, timeout=20)
    shorts = list(Execution.objects.filter(kind="short"))
    # Handed back after waiting 2 s for a thread, they ran on the idle worker
    # while the long jobs in front of them were still running.
    assert {e.pid for e in shorts} == {second.pid}, first.output()
    assert not Execution.objects.filter(kind="long").exists()
    release("go")
    wait_for(drained(48), timeout=20)
    for worker in (first, second):
        worker.signal(signal.SIGTERM)
    for worker in (first, second):
        assert worker.wait(timeout=30) == 0, worker.output()
    assert "6 claimed job(s) waited" in first.output()
    assert "job release" not in first.output()  # the summary says it; no WARNING a job
