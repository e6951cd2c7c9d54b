import threading
from datetime import timedelta

import pytest
from django.db import connection

from later_django.exceptions import InvalidArgument, LeaseLost
from later_django.log import Consumer, append_many, cleanup, committed_offsets, compact, read
from later_django.models import LogConsumerLease, LogConsumerMember, LogRecord
from later_django.topics.routing import partition_for_key

pytestmark = pytest.mark.django_db(transaction=True)


def fill(n_keys: int = 8, per_key: int = 5) -> None:
    append_many(
        "events", [(f"key-{k}", f"{k}:{i}".encode()) for i in range(per_key) for k in range(n_keys)]
    )


def test_a_lone_member_reads_every_partition_and_commits_its_position():
    fill()
    with Consumer("billing", "events", member_id="a") as consumer:
        records = consumer.poll(max_records=1000)
        assert consumer.partitions == [0, 1, 2, 3]
        assert len(records) == 40
        consumer.commit()
        assert consumer.poll() == []
    offsets = committed_offsets("billing", "events")
    assert sum(offsets.values()) == 40


def test_records_not_committed_are_delivered_again_to_the_next_member():
    fill(n_keys=4, per_key=2)
    first = Consumer("billing", "events", member_id="a")
    assert len(first.poll(max_records=1000)) == 8
    first.leave()
    second = Consumer("billing", "events", member_id="b")
    assert len(second.poll(max_records=1000)) == 8
    second.leave()


def test_two_members_split_the_partitions_between_them():
    fill()
    a = Consumer("billing", "events", member_id="a")
    b = Consumer("billing", "events", member_id="b")
    a.poll()
    b.poll()
    a.poll()  # a lets go of the partitions rendezvous hashing now gives to b
    b.poll()
    assert set(a.partitions).isdisjoint(b.partitions)
    assert sorted(a.partitions + b.partitions) == [0, 1, 2, 3]
    a.leave()
    b.leave()


def test_leaving_releases_leases_at_once_and_a_stale_member_cannot_commit():
    fill()
    a = Consumer("billing", "events", member_id="a")
    a.poll(max_records=1000)
    held_epochs = dict(a.leases)
    # b takes over after a leaves; a's in-memory epochs are now stale.
    stale = Consumer("billing", "events", member_id="a")
    stale.leases, stale.polled = dict(held_epochs), {p: 1 for p in held_epochs}
    a.leave()
    assert not LogConsumerLease.objects.exclude(owner=None).exists()
    assert not LogConsumerMember.objects.exists()
    b = Consumer("billing", "events", member_id="b")
    b.poll()
    assert all(b.leases[p] == held_epochs[p] + 1 for p in b.partitions)
    with pytest.raises(
        LeaseLost, match=r"no longer owns 'events' partition 0 .*nothing was stored"
    ):
        stale.commit()
    assert committed_offsets("billing", "events") == {}
    b.leave()


def test_an_unresponsive_member_is_replaced_after_its_session():
    fill()
    a = Consumer("billing", "events", member_id="a", session_seconds=1)
    a.poll()
    LogConsumerMember.objects.update(
        heartbeat_at=LogConsumerMember.objects.get().heartbeat_at - timedelta(seconds=2)
    )
    LogConsumerLease.objects.update(
        expires_at=LogConsumerLease.objects.first().expires_at - timedelta(seconds=2)
    )
    b = Consumer("billing", "events", member_id="b", session_seconds=1)
    b.poll()
    assert b.partitions == [0, 1, 2, 3]
    with pytest.raises(LeaseLost):
        a.commit({0: 1})
    b.leave()


def test_compaction_keeps_the_newest_record_per_key_below_every_groups_offset():
    append_many("events", [("k", b"v1"), ("k", b"v2"), ("k", b"v3"), ("k", b"v4")])
    partition = partition_for_key("k", 4)
    with (
        Consumer("fast", "events", member_id="f") as fast,
        Consumer("slow", "events", member_id="s") as slow,
    ):
        fast.poll()
        fast.commit({partition: 4})
        slow.poll()
        slow.commit({partition: 2})
    assert compact("events") == 2  # offsets 0 and 1: below the slow group's offset
    assert [r.payload for r in read("events", partition)] == [b"v3", b"v4"]
    assert cleanup("events", timedelta(0)) == 0  # nothing left below the boundary of 2
    assert LogRecord.objects.count() == 2


def test_a_partition_no_group_committed_in_is_never_compacted():
    append_many("events", [("k", b"v1"), ("k", b"v2")])
    assert compact("events") == 0
    assert cleanup("events", timedelta(0)) == 0
    assert LogRecord.objects.count() == 2


def test_concurrent_members_never_both_own_a_partition():
    fill()
    seen: list[list[list[int]]] = [[], []]  # what each member held after the free run, at the end
    lock = threading.Lock()
    barrier = threading.Barrier(3)

    def member(name: str) -> None:
        consumer = Consumer("billing", "events", member_id=name)
        try:
            barrier.wait()
            for _ in range(5):  # polls racing each other in any order
                consumer.poll()
            barrier.wait()
            with lock:
                seen[0].append(consumer.partitions)
            barrier.wait()
            # Two polls in step: the first lets go of every partition that is now another
            # member's, the second takes what was let go. Only then must all be owned.
            for _ in range(2):
                consumer.poll()
                barrier.wait()
            with lock:
                seen[1].append(consumer.partitions)
            barrier.wait()
        finally:
            consumer.leave()
            connection.close()

    threads = [threading.Thread(target=member, args=(n,)) for n in "xyz"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for held in seen:
        assert len(held) == 3
        claimed = [p for partitions in held for p in partitions]
        assert len(claimed) == len(set(claimed)), held
    # Racing polls may all end mid-handover, holding nothing; after the settled round
    # every partition has exactly one owner.
    assert sorted(p for partitions in seen[1] for p in partitions) == [0, 1, 2, 3], seen[1]


def test_consumer_arguments_are_checked():
    with pytest.raises(InvalidArgument, match=r"group is 'bad group'"):
        Consumer("bad group", "events")
    with pytest.raises(InvalidArgument, match=r"session_seconds is 0; it must be >= 1"):
        Consumer("g", "events", session_seconds=0)
    with pytest.raises(InvalidArgument, match=r"max_records is 0"):
        Consumer("g", "events").poll(max_records=0)
