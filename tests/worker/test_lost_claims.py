"""Jobs leased to a worker that never learnt of them still run.

A claim can commit on the server and reach its worker as an error: the
connection broke after the commit and before the answer, or a later step of
the same claiming turn failed. The worker renews every lease it owns, and no
worker claims a job leased to itself, so such jobs would wait for as long as
the worker lived. The worker looks for them and runs them as claimed.
"""

from __future__ import annotations

import logging

import pytest
from django.db import connection

from later_django.engine.claiming import claim
from later_django.jobs import get_job
from later_django.states import Stage
from later_django.topics.assignment import Preference
from later_django.topics.claiming import claim_heads
from later_django.worker.config import WorkerConfig
from later_django.worker.runner import Worker
from tests import tasks
from tests.conftest import held_by_another_connection, wait_for
from tests.models import Execution
from tests.topics import tasks as ordered
from tests.worker.in_process import worker_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

LOST = "by a claim whose answer was lost"
KEPT = "a claim failed after 1 job(s) were claimed; running those"


def ran(kind: str, count: int = 1):
    def condition() -> bool:
        """the jobs have run"""
        return Execution.objects.filter(kind=kind).count() >= count

    return condition


def attempts(job_id: str) -> list[tuple[str, str | None]]:
    view = get_job(job_id, namespace="tests")
    return [(a.worker_id, a.outcome) for a in view.record.attempts]


def test_jobs_claimed_for_a_worker_that_never_got_the_answer_run_once(caplog):
    plain = tasks.record.enqueue("lost-answer", "plain")
    head = ordered.step.using(partition_key="k").enqueue("k", 1)
    worker = Worker(WorkerConfig(install_signal_handlers=False, concurrency=2))
    # The claims commit under the worker's id; their answers never reach it.
    [claimed] = claim("tests", worker.id, queues=None, free=8, lease_seconds=2, using="default")
    [claimed_head] = claim_heads(
        "tests",
        worker.id,
        free=8,
        lease_seconds=2,
        preference=Preference(),
        queues=None,
        running=set(),
        using="default",
    )
    assert (claimed.job_id, claimed_head.job_id) == (plain.id, head.id)

    logs = caplog.at_level(logging.WARNING, logger="later_django.worker.runner")
    with logs, worker_thread(worker):
        wait_for(ran("lost-answer"), timeout=20)
        wait_for(ran("step:k"), timeout=20)
        wait_for(lambda: get_job(head.id, namespace="tests").stage == Stage.SUCCESS)
        wait_for(lambda: get_job(plain.id, namespace="tests").stage == Stage.SUCCESS)

    # Run by the worker they were leased to, in the attempt their claims began: the
    # head was not left to lapse and be taken over with a "lost" attempt.
    assert attempts(plain.id) == [(worker.id, "success")]
    assert attempts(head.id) == [(worker.id, "success")]
    assert Execution.objects.filter(kind="lost-answer").count() == 1
    assert Execution.objects.filter(kind="step:k").count() == 1
    assert any(LOST in r.getMessage() and plain.id in r.getMessage() for r in caplog.records)


def test_a_claiming_turn_whose_second_step_fails_runs_what_its_first_step_claimed(
    caplog, monkeypatch
):
    """A turn claims delivery-queue jobs and partition heads (an idle worker's turn takes
    the queue first). With the heads' table locked every heads step fails, so the job
    enqueued then is claimed by a turn whose heads step then fails: it runs, lock or not,
    and the turn keeps it rather than leaving it to be found later as leased to nobody."""
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: a lock that makes one table's statements time out")
    # The worker's sessions wait 100 ms for a lock, then fail (a transient error).
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=100")

    def lock_the_heads() -> None:
        with connection.cursor() as cursor:
            cursor.execute("LOCK TABLE later_partition_head IN ACCESS EXCLUSIVE MODE")

    logs = caplog.at_level(logging.WARNING)
    with logs, worker_thread(concurrency=8), held_by_another_connection(lock_the_heads):
        # One job: the queue step that claims it leaves room, so its turn goes on to
        # the heads step.
        job = tasks.record.enqueue("second-step", "1")

        def kept() -> bool:
            """the turn that claimed the job has seen its heads step fail"""
            return any(KEPT in r.getMessage() for r in caplog.records)

        wait_for(ran("second-step"), timeout=60)  # the heads' table still locked
        wait_for(kept, timeout=60)

    assert get_job(job.id, namespace="tests").stage == Stage.SUCCESS
    assert Execution.objects.filter(kind="second-step").count() == 1
    # Kept by the turn itself, not found again later as leased to nobody who knew.
    assert not any(LOST in r.getMessage() for r in caplog.records)
