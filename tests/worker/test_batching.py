"""How a running worker sizes its claims: whole batches, and no more than it can soon run."""

from collections import Counter

import pytest

from later_django.models import JobIndexRow
from later_django.worker.claiming import BATCH
from tests import tasks
from tests.worker.in_process import run_burst_in_process

pytestmark = pytest.mark.django_db(transaction=True)


def claim_sizes(ids: list[str]) -> list[int]:
    """Jobs claimed together share the claim's start time: the sizes of those groups."""
    rows = JobIndexRow.objects.filter(job_id__in=ids).values_list("started_at", "stage")
    assert {stage for _, stage in rows} == {"success"}
    return sorted(Counter(started for started, _ in rows).values())


def enqueue(count: int) -> list[str]:
    # Jobs of uneven length, so slots free up one by one rather than all at once.
    calls = [(("batching", str(i), 0.01 + 0.004 * (i % 5)), {}) for i in range(count)]
    return [r.id for r in tasks.sleep_then_record.enqueue_many(calls)]


def test_a_busy_worker_claims_a_whole_batch_at_a_time():
    ids = enqueue(4 * BATCH)
    run_burst_in_process(concurrency=8)
    # Claiming each time a slot frees up would take a job or two per claim.
    assert claim_sizes(ids) == [BATCH] * 4


def test_a_one_slot_worker_holds_at_most_two_jobs_beyond_the_one_it_runs():
    ids = enqueue(2 * BATCH)
    run_burst_in_process(concurrency=1)
    sizes = claim_sizes(ids)
    assert sum(sizes) == 2 * BATCH
    assert max(sizes) <= 3
