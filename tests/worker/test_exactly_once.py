"""Many workers, many jobs, no crash: every job runs exactly once, with no lock failures."""

import signal
from collections import Counter

import pytest
from django.db.models import Count

from later_django.models import DeliveryCommand, JobExecution, JobIndexRow
from tests import tasks
from tests.conftest import wait_for
from tests.db_state import index_stage_counts, stage_counts
from tests.models import Execution

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

JOBS = 300
WORKERS = 3


def test_three_workers_run_each_of_three_hundred_jobs_exactly_once(start_worker):
    workers = [start_worker("--concurrency", "4") for _ in range(WORKERS)]
    # Enqueued while the workers start, in batches, as an application would. Jobs of
    # 50 ms: a worker holds at most what its slots start within 100 ms (12 jobs here),
    # and two workers alone would take about two seconds, so every worker gets a share
    # even if it starts a second after the others.
    for start in range(0, JOBS, 50):
        tasks.sleep_then_record.enqueue_many(
            [(("once", str(i), 0.05), {}) for i in range(start, start + 50)]
        )

    wait_for(lambda: JobIndexRow.objects.filter(stage="success").count() == JOBS, timeout=60)
    for worker in workers:
        worker.signal(signal.SIGTERM)
    for worker in workers:
        assert worker.wait(timeout=30) == 0

    runs = Counter(Execution.objects.filter(kind="once").values_list("value", flat=True))
    assert runs == Counter({str(i): 1 for i in range(JOBS)})
    # Every worker took a share of the work.
    by_pid = dict(Execution.objects.values_list("pid").annotate(n=Count("id")))
    assert sorted(by_pid) == sorted(w.pid for w in workers)
    assert not DeliveryCommand.objects.exists()
    assert not JobExecution.objects.exists()
    assert stage_counts("tests") == index_stage_counts("tests") == {"success": JOBS}
    for worker in workers:
        output = worker.output()
        assert "database is locked" not in output
        assert "Traceback" not in output
        assert " fenced=0 " in output
    claimed = sum(int(w.output().split(" claimed=")[1].split()[0]) for w in workers)
    assert claimed == JOBS
