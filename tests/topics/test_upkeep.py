"""Partition upkeep: renewal of running heads' leases, truncation behind heads, healing."""

from datetime import timedelta

import pytest
from django.utils import timezone

from later_django.engine.outcomes import SUCCESS, Outcome
from later_django.models import PartitionHead, PartitionJob, PartitionLease
from later_django.topics import upkeep
from later_django.topics.routing import partition_for_key
from tests.conftest import seconds_while_locked
from tests.topics import tasks
from tests.worker.in_process import burst_worker

from .helpers import ORDERS, claim, keys_in_distinct_partitions

pytestmark = pytest.mark.django_db


def test_renewal_extends_the_leases_and_heads_only_of_partitions_the_worker_is_running():
    mine, idle = keys_in_distinct_partitions(2)
    tasks.step.using(partition_key=mine).enqueue(mine, 0)
    [item] = claim("worker-a")
    tasks.step.using(partition_key=idle).enqueue(idle, 0)
    PartitionLease.objects.create(
        namespace="tests",
        topic="orders",
        partition=99,
        owner="worker-a",
        epoch=1,
        expires_at=timezone.now(),
    )
    assert upkeep.renew("tests", "worker-a", lease_seconds=60, using="default") == 1
    soon = timezone.now() + timedelta(seconds=50)
    assert PartitionLease.objects.get(partition=item.partition).expires_at > soon
    assert PartitionHead.objects.get(partition=item.partition).available_at > soon
    assert PartitionLease.objects.get(partition=99).expires_at < soon
    assert PartitionHead.objects.exclude(partition=item.partition).get().available_at < soon


def test_a_worker_keeps_renewing_a_partition_whose_heads_outcome_it_has_not_yet_stored():
    tasks.step.using(partition_key="k").enqueue("k", 0)
    worker = burst_worker()
    [item] = claim(worker.id)
    lease = PartitionLease.objects.get(partition=item.partition)
    soon = timezone.now() + timedelta(seconds=1)
    PartitionLease.objects.filter(pk=lease.pk).update(expires_at=soon)
    # The head has finished and left the running jobs; its outcome waits in the writer,
    # as it does while the database refuses it.
    with worker.lock:
        worker.outcomes.emit(Outcome(item.job_id, item.epoch, SUCCESS, item.record, soon))
    worker.topics.heartbeat()
    renewed = PartitionLease.objects.get(pk=lease.pk).expires_at
    assert renewed > soon
    assert renewed > timezone.now() + timedelta(seconds=worker.backend.later.lease_seconds / 2)
    worker.outcomes.collect()  # stored: the partition moves on and nothing is left to renew
    assert not worker.outcomes.unstored_heads
    assert PartitionLease.objects.filter(pk=lease.pk, owner=worker.id).count() == 0


@pytest.mark.django_db(transaction=True)  # the holding thread must see the rows
def test_renewal_skips_a_head_locked_by_an_outcome_in_progress_instead_of_waiting(vendor):
    if vendor != "postgresql":
        pytest.skip("PostgreSQL only: SQLite has one writer at a time")
    busy_key, free_key = keys_in_distinct_partitions(2)
    tasks.step.using(partition_key=busy_key).enqueue(busy_key, 0)
    tasks.step.using(partition_key=free_key).enqueue(free_key, 0)
    items = claim("worker-a")
    assert len(items) == 2
    busy, free = sorted(items, key=lambda i: i.partition != partition_for_key(busy_key, ORDERS))
    waited = seconds_while_locked(
        [PartitionHead.objects.filter(partition=busy.partition)],
        lambda: upkeep.renew("tests", "worker-a", lease_seconds=60, using="default"),
    )

    assert waited < 5
    soon = timezone.now() + timedelta(seconds=50)
    assert PartitionHead.objects.get(partition=free.partition).available_at > soon
    assert PartitionHead.objects.get(partition=busy.partition).available_at < soon


def test_another_worker_cannot_renew_a_lease_it_does_not_hold():
    tasks.step.using(partition_key="k").enqueue("k", 0)
    claim("worker-a")
    assert upkeep.renew("tests", "worker-b", lease_seconds=60, using="default") == 0


def test_truncation_deletes_rows_left_behind_a_head_in_bounded_batches():
    ids = [tasks.step.using(partition_key="k").enqueue("k", n).id for n in range(5)]
    head = PartitionHead.objects.get()
    PartitionJob.objects.filter(sequence=1).delete()
    head.sequence, head.job_id = 4, ids[3]
    head.save()
    assert upkeep.truncate("tests", using="default", limit=1) == 1
    assert upkeep.truncate("tests", using="default") == 1
    assert upkeep.truncate("tests", using="default") == 0
    assert list(PartitionJob.objects.values_list("sequence", flat=True).order_by("sequence")) == [
        4,
        5,
    ]


def test_healing_gives_a_headless_partition_its_first_row_back_as_head():
    ids = [tasks.step.using(partition_key="k").enqueue("k", n).id for n in range(3)]
    PartitionHead.objects.all().delete()
    assert upkeep.heal("tests", using="default") == 1
    head = PartitionHead.objects.get()
    assert (head.sequence, head.job_id) == (1, ids[0])
    assert upkeep.heal("tests", using="default") == 0
