"""The claim: batches (up to 48, once 16 are ready) or one, priority order, SKIP LOCKED,
lapsed leases, fencing."""

import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from later_django.engine.claiming import BATCH, SHARE_AT, claim
from later_django.engine.outcomes import SUCCESS, Outcome, record_outcomes
from later_django.models import DeliveryCommand, JobExecution, JobIndexRow
from tests import tasks
from tests.conftest import seconds_while_locked
from tests.db_state import index_stage_counts, stage_counts

pytestmark = pytest.mark.django_db(transaction=True)

NS = "tests"


def take(owner="w1", *, free=16, queues=None, lease_seconds=30.0, namespace=NS):
    return claim(
        namespace, owner, queues=queues, free=free, lease_seconds=lease_seconds, using="default"
    )


def enqueue(count, **using):
    task = tasks.add.using(**using) if using else tasks.add
    return [r.id for r in task.enqueue_many([((i, 0), {}) for i in range(count)])]


def test_a_claim_takes_at_most_a_batch_however_much_room_there_is():
    assert (BATCH, SHARE_AT) == (48, 16)  # as docs/worker.md says
    ids = enqueue(BATCH + 5)
    assert [c.job_id for c in take(free=1000)] == ids[:BATCH]
    # Five remain: fewer than SHARE_AT, so one at a time.
    assert [c.job_id for c in take(free=1000)] == [ids[BATCH]]


def test_from_sixteen_ready_a_claim_takes_them_all_if_there_is_room():
    ids = enqueue(20)
    assert [c.job_id for c in take(free=100)] == ids


def test_sixteen_are_claimed_at_once_when_at_least_sixteen_are_ready():
    ids = enqueue(20)
    first = take()
    assert [c.job_id for c in first] == ids[:16]
    # Four remain: fewer than a batch, so one at a time lets other workers share them.
    assert [c.job_id for c in take()] == [ids[16]]
    assert [c.job_id for c in take()] == [ids[17]]


def test_a_short_queue_is_claimed_one_job_at_a_time():
    ids = enqueue(15)
    assert [c.job_id for c in take()] == [ids[0]]


def test_a_batch_never_exceeds_the_free_slots():
    ids = enqueue(20)
    assert [c.job_id for c in take(free=5)] == ids[:5]
    assert take(free=0) == []


def test_a_claim_says_whether_it_left_ready_jobs_behind():
    # The worker claims again at once only when this says more may be ready.
    ids = enqueue(BATCH + 5 + SHARE_AT)
    full = take(free=1000)
    assert len(full) == BATCH
    assert full.left_over
    some = take(free=5)
    assert [c.job_id for c in some] == ids[BATCH : BATCH + 5]
    assert some.left_over
    rest = take(free=1000)
    assert [c.job_id for c in rest] == ids[BATCH + 5 :]
    assert not rest.left_over
    assert not take().left_over


def test_a_short_queue_claimed_one_at_a_time_says_so_until_its_last_job():
    ids = enqueue(3)
    first, second, last = take(), take(), take()
    assert [c.job_id for c in (*first, *second, *last)] == ids
    assert (first.left_over, second.left_over, last.left_over) == (True, True, False)


def test_claims_follow_priority_then_enqueue_order():
    low = enqueue(1, priority=-100)
    normal = enqueue(2)
    high = enqueue(1, priority=100)
    order = [take()[0].job_id for _ in range(4)]
    assert order == high + normal + low
    assert take() == []


def test_a_batch_comes_back_in_priority_then_enqueue_order():
    # Slots take a batch's jobs in the order the claim returns them.
    jobs = []
    for n in range(20):
        jobs += enqueue(1, priority=(n * 7) % 11 - 5)
    priorities = {job: (n * 7) % 11 - 5 for n, job in enumerate(jobs)}
    expected = sorted(jobs, key=lambda job: (-priorities[job], jobs.index(job)))
    assert [c.job_id for c in take()] == expected[:16]


def test_a_queue_filter_claims_only_those_queues():
    default = enqueue(1)
    emails = enqueue(1, queue_name="emails")
    assert [c.job_id for c in take(queues=["emails", "slow"])] == emails
    assert take(queues=["emails", "slow"]) == []
    assert [c.job_id for c in take()] == default


def test_another_namespace_never_claims_the_job():
    enqueue(1)
    assert take(namespace="elsewhere") == []


def test_a_lazy_claim_leaves_records_encoded_until_loaded():
    [job_id] = enqueue(1)
    [claimed] = claim(
        NS, "worker-a", queues=None, free=16, lease_seconds=30, using="default", lazy=True
    )
    assert claimed.record is None
    assert claimed.raw is not None

    claimed.load()
    assert claimed.raw is None
    assert claimed.record is not None
    assert (claimed.record.id, claimed.record.args) == (job_id, [0, 0])
    assert [a.worker_id for a in claimed.record.attempts] == ["worker-a"]
    claimed.load()  # only once: a second call adds no attempt
    assert len(claimed.record.attempts) == 1


def test_a_delayed_job_is_not_claimed():
    enqueue(1, run_after=timedelta(hours=1))
    assert take() == []


def test_a_claim_marks_jobs_running_under_a_lease(vendor):
    [job_id] = enqueue(1)
    before = timezone.now()
    [claimed] = take("worker-a", lease_seconds=30)

    assert claimed.epoch == 1
    assert claimed.record is not None
    assert [a.worker_id for a in claimed.record.attempts] == ["worker-a"]
    row = JobIndexRow.objects.get(job_id=job_id)
    assert (row.stage, row.attempts, row.worker_id) == ("running", 1, "worker-a")
    command = DeliveryCommand.objects.get(job_id=job_id)
    assert command.lease_owner == "worker-a"
    assert command.available_at >= before + timedelta(seconds=29)
    lease = JobExecution.objects.get(job_id=job_id)
    assert (lease.owner, lease.epoch) == ("worker-a", 1)
    assert stage_counts(NS) == index_stage_counts(NS) == {"running": 1}


def test_claim_statements_do_not_grow_with_the_batch(django_assert_num_queries):
    enqueue(40)
    # PostgreSQL: the whole claim is one statement in autocommit. SQLite: BEGIN IMMEDIATE,
    # the write-lock statement, pick, lease commands, previous owners, execution leases,
    # index rows, read records, COMMIT.
    expected = 1 if connection.vendor == "postgresql" else 9
    with django_assert_num_queries(expected):
        assert len(take()) == 16
    with django_assert_num_queries(expected):
        assert len(take()) == 16


def test_a_lapsed_lease_makes_the_job_claimable_again_with_a_higher_epoch():
    [job_id] = enqueue(1)
    [_first] = take("worker-a", lease_seconds=0.2)
    assert take("worker-b") == []  # lease current: nobody else gets it
    time.sleep(0.3)
    [second] = take("worker-b")

    assert (second.job_id, second.epoch) == (job_id, 2)
    assert second.record is not None
    assert [(a.worker_id, a.outcome) for a in second.record.attempts] == [
        ("worker-a", "lost"),
        ("worker-b", None),
    ]
    assert JobIndexRow.objects.get(job_id=job_id).attempts == 2


def test_a_worker_never_claims_again_a_job_whose_lease_it_let_lapse():
    """A worker stopped (SIGSTOP) past its lease still holds the job in memory; claiming
    it a second time ran it twice in that worker and dropped the second run's outcome,
    leaving the job running for as long as the worker lived."""
    [job_id] = enqueue(1)
    [held] = take("worker-a", lease_seconds=0.2)
    time.sleep(0.3)

    assert take("worker-a") == []
    [taken] = take("worker-b")  # other workers take it over as before
    assert (taken.job_id, taken.epoch) == (held.job_id, 2) == (job_id, 2)


def store(owner, item):
    outcome = Outcome(item.job_id, item.epoch, SUCCESS, item.record, timezone.now())
    return record_outcomes(NS, owner, [outcome], retention_seconds=60, using="default")


def test_a_worker_whose_lease_was_taken_over_cannot_store_an_outcome(caplog):
    [job_id] = enqueue(1)
    [stale] = take("worker-a", lease_seconds=0.2)
    time.sleep(0.3)
    [current] = take("worker-b")

    assert store("worker-a", stale) == []
    assert JobIndexRow.objects.get(job_id=job_id).stage == "running"
    assert (
        f"fenced: job id={job_id} epoch=1 was taken over by worker worker-b (epoch 2); "
        "outcome success not stored"
    ) in caplog.messages
    assert [o.job_id for o in store("worker-b", current)] == [job_id]
    assert JobIndexRow.objects.get(job_id=job_id).stage == "success"
    assert not DeliveryCommand.objects.filter(job_id=job_id).exists()
    assert not JobExecution.objects.filter(job_id=job_id).exists()


def test_a_refused_outcome_says_what_became_of_its_job(caplog):
    finished, deleted = enqueue(2)
    # Fewer than SHARE_AT ready: each claim takes one, in enqueue order.
    [stale_finished] = take("worker-a", lease_seconds=0.2)
    [stale_deleted] = take("worker-a", lease_seconds=0.2)
    assert (stale_finished.job_id, stale_deleted.job_id) == (finished, deleted)
    time.sleep(0.3)
    [current] = take("worker-b")  # the lease that lapsed first
    assert current.job_id == finished
    store("worker-b", current)
    JobIndexRow.objects.filter(job_id=deleted).delete()
    JobExecution.objects.filter(job_id=deleted).delete()

    assert store("worker-a", stale_finished) == []
    assert store("worker-a", stale_deleted) == []
    assert (
        f"fenced: job id={finished} epoch=1 is no longer leased to this worker (the job is "
        "success, last run by worker worker-b); outcome success not stored"
    ) in caplog.messages
    assert f"fenced: job id={deleted} epoch=1 was deleted; outcome success not stored" in (
        caplog.messages
    )


def test_rows_another_transaction_has_locked_are_skipped_not_waited_for(vendor):
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite serialises writers instead")
    ids = enqueue(20)
    mine: list[str] = []
    # What a concurrent claim holds mid-statement: the first sixteen commands' row locks.
    elapsed = seconds_while_locked(
        [DeliveryCommand.objects.filter(job_id=job_id) for job_id in ids[:16]],
        lambda: mine.extend(c.job_id for c in take("worker-b")),
    )
    # Four unlocked rows are fewer than a batch, so one of them; never a locked one.
    assert mine == [ids[16]]
    assert elapsed < 1.0
