"""How a running worker sizes its claims and outcome statements: whole batches where it can."""

from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection

from later_django.engine.claiming import BATCH, SHARE_AT
from later_django.models import JobIndexRow
from later_django.worker.runner import HOLD_SECONDS, MAX_RESERVE
from later_django.worker.writer import OUTCOME_BATCH
from tests import tasks
from tests.topics import tasks as topic_tasks
from tests.worker.in_process import burst_worker, run_burst_in_process

pytestmark = pytest.mark.django_db(transaction=True)


def claim_sizes(ids: list[str]) -> list[int]:
    """Jobs claimed together share the claim's start time: the sizes of those groups."""
    rows = JobIndexRow.objects.filter(job_id__in=ids).values_list("started_at", "stage")
    assert {stage for _, stage in rows} == {"success"}
    return sorted(Counter(started for started, _ in rows).values())


def enqueue(count: int, seconds: float) -> list[str]:
    # Jobs of uneven length, so slots free up one by one rather than all at once.
    calls = [(("batching", str(i), seconds + 0.004 * (i % 5)), {}) for i in range(count)]
    return [r.id for r in tasks.sleep_then_record.enqueue_many(calls)]


def test_a_busy_worker_claims_a_whole_batch_at_a_time():
    ids = [r.id for r in tasks.noop.enqueue_many([((), {})] * (8 * BATCH))]
    run_burst_in_process(concurrency=8)
    # Its first claim fills the slots; once jobs have shown they are short (the first
    # job of each slot also opens its connection), it claims whole batches. Claiming
    # each time a slot frees up would take a job or two per claim.
    sizes = claim_sizes(ids)
    assert sum(sizes) == 8 * BATCH
    assert sizes.count(BATCH) >= 4, str(sizes)


def test_a_one_slot_worker_holds_at_most_one_job_beyond_the_one_it_runs():
    # Jobs of about HOLD_SECONDS: the one slot starts at most one more in that time.
    ids = enqueue(2 * SHARE_AT, seconds=HOLD_SECONDS)
    run_burst_in_process(concurrency=1)
    sizes = claim_sizes(ids)
    assert sum(sizes) == 2 * SHARE_AT
    assert max(sizes) <= 2, sizes


def outcome_statement_sizes(ids: list[str]) -> list[int]:
    """Outcomes stored by one statement share its transition time: the sizes of those groups."""
    rows = JobIndexRow.objects.filter(job_id__in=ids).values_list("transitioned_at", "stage")
    assert {stage for _, stage in rows} == {"success"}
    return sorted(Counter(at for at, _ in rows).values())


def test_outcomes_of_jobs_finishing_close_together_are_stored_by_one_statement():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite's worker stores outcomes in its main loop")
    ids = enqueue(2 * OUTCOME_BATCH, seconds=0.01)
    worker = burst_worker(concurrency=8)
    # Long enough that the slots' speed does not matter: a batch fills up first.
    worker.outcomes.gather_seconds = 5.0
    run_burst_in_process(worker)
    # Two batches' worth, give or take a job that finished as a statement began.
    # Storing each outcome as it came would take a statement for each job or two.
    assert len(outcome_statement_sizes(ids)) <= 3


def test_an_ordered_jobs_outcome_does_not_wait_for_a_batch_while_other_jobs_run():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite's worker stores outcomes in its main loop")
    slow = tasks.sleep_only.enqueue(2.0)
    ordered = topic_tasks.step.using(partition_key="k").enqueue("k", 1)
    worker = burst_worker(concurrency=2)
    worker.outcomes.gather_seconds = 5.0
    run_burst_in_process(worker)
    stored = dict(
        JobIndexRow.objects.filter(job_id__in=[slow.id, ordered.id]).values_list(
            "job_id", "transitioned_at"
        )
    )
    # The partition's next job waits for it, so it does not wait for a batch to fill.
    # Gathered, it would have been stored with the slow job's outcome, at its end.
    assert stored[slow.id] - stored[ordered.id] > timedelta(seconds=1)


def test_a_worker_running_short_jobs_holds_more_claimed_work_than_one_batch():
    tasks.noop.enqueue_many([((), {})] * (10 * BATCH))
    worker = run_burst_in_process(concurrency=8)
    # Short jobs: a batch runs out before the next claim is back, so it holds more.
    assert BATCH < worker.reserve <= MAX_RESERVE


def test_a_worker_running_long_jobs_holds_only_what_its_slots_run():
    # Jobs ten times HOLD_SECONDS: no slot would start a held job in time, so it holds none.
    ids = enqueue(2 * SHARE_AT, seconds=10 * HOLD_SECONDS)
    worker = run_burst_in_process(concurrency=8)
    assert worker.reserve == 0
    assert max(claim_sizes(ids)) <= 8
