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


def test_a_second_worker_runs_long_jobs_the_first_has_no_free_thread_for(start_worker):
    tasks.sleep_then_record.enqueue_many([(("long", str(i), 3), {}) for i in range(4)])
    first = start_worker("--burst", "--concurrency", "2")

    def first_claimed() -> bool:
        """the first worker has claimed jobs"""
        return JobIndexRow.objects.filter(stage="running").exists()

    wait_for(first_claimed)
    # A worker that has not yet seen how long its jobs take holds only what its
    # threads can start; holding more would leave the second worker idle while
    # two jobs waited behind the first worker's for three seconds.
    second = start_worker("--burst", "--concurrency", "2")
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
    enqueued = time.time()
    tasks.sleep_then_record.enqueue_many([(("long", str(i), 6), {}) for i in range(2)])
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
    # Handed back after waiting 2 s for a thread, they ran on the idle worker long
    # before the 6 s jobs in front of them ended.
    assert {e.pid for e in shorts} == {second.pid}, first.output()
    assert max(e.at for e in shorts) - enqueued < 5
    wait_for(drained(48), timeout=20)
    for worker in (first, second):
        worker.signal(signal.SIGTERM)
    for worker in (first, second):
        assert worker.wait(timeout=30) == 0, worker.output()
    assert "6 claimed job(s) waited" in first.output()
    assert "job release" not in first.output()  # the summary says it; no WARNING a job
