"""Routing keys to partitions and partitions to workers: stable, documented functions."""

import subprocess
import sys
from collections import Counter

import pytest

from later_django import partition_for_key
from later_django.exceptions import InvalidArgument
from later_django.topics.assignment import spread
from tests.conftest import ROOT


@pytest.mark.parametrize(
    ("key", "count", "partition"),
    [("order-1", 16, 13), ("order-2", 16, 11), ("customer-42", 8, 2), ("ü-ñ", 4096, 2151)],
)
def test_partition_for_key_gives_the_documented_blake2b_partition(key, count, partition):
    # Fixed values: a change here would reroute every producer's keys.
    assert partition_for_key(key, count) == partition


def test_partition_for_key_is_the_same_in_other_processes_whatever_their_hash_seed():
    code = "from later_django import partition_for_key; print(partition_for_key('order-1', 16))"
    for seed in ("1", "2"):
        out = subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
            cwd=ROOT,
        )
        assert out.stdout.strip() == "13"


def test_keys_spread_over_every_partition():
    counts = [0] * 16
    for n in range(4000):
        counts[partition_for_key(f"key-{n}", 16)] += 1
    assert min(counts) > 150
    assert max(counts) < 350


@pytest.mark.parametrize(
    ("count", "shown"), [(0, "0"), (4097, "4097"), (True, "True"), ("16", "'16'")]
)
def test_a_partition_count_outside_1_to_4096_is_refused(count, shown):
    with pytest.raises(InvalidArgument) as caught:
        partition_for_key("k", count)
    assert str(caught.value) == (
        f"partition_count is {shown}; it must be a whole number from 1 to 4096."
    )


def test_a_key_that_is_not_a_string_is_refused():
    with pytest.raises(InvalidArgument) as caught:
        partition_for_key(7, 16)  # type: ignore[arg-type]
    assert str(caught.value) == (
        "partition_key is 7; it must be a non-empty string of at most 255 characters "
        "(use str(order.pk) for a number)."
    )


def test_partitions_are_spread_evenly_by_rendezvous_score():
    for count in (1, 3, 8, 16, 256):
        for workers in (["worker-a"], ["worker-a", "worker-b"], [f"worker-{n}" for n in range(7)]):
            owners = spread("orders", count, workers)
            loads = Counter(owners)
            assert len(owners) == count
            assert set(loads) <= set(workers)
            share = count // len(workers)
            assert all(share <= loads[w] <= share + 1 for w in workers), (count, loads)
            # The order the live set is read in does not matter: all workers agree.
            assert spread("orders", count, list(reversed(workers))) == owners


def test_two_workers_always_split_eight_partitions_four_and_four():
    # Highest-score-only hashing gave one of two workers all eight one time in 128.
    for n in range(300):
        pair = [f"host:{n}:a", f"host:{n}:b"]
        assert sorted(Counter(spread("orders", 8, pair)).values()) == [4, 4]


def test_a_joining_worker_takes_its_share_and_little_else_moves():
    before = ["worker-a", "worker-b", "worker-c"]
    after = [*before, "worker-d"]
    old, new = spread("orders", 256, before), spread("orders", 256, after)
    assert new.count("worker-d") == 64
    moved = sum(o != n for o, n in zip(old, new, strict=True))
    assert moved <= 64 + 16, moved  # its share, and a few shuffled to keep loads even


def test_a_dying_worker_hands_mostly_its_own_partitions_to_the_survivors():
    live = ["worker-a", "worker-b", "worker-c"]
    survivors = ["worker-a", "worker-c"]
    old, new = spread("orders", 256, live), spread("orders", 256, survivors)
    kept = sum(o == n for o, n in zip(old, new, strict=True) if o != "worker-b")
    assert kept >= old.count("worker-a") + old.count("worker-c") - 16
    assert sorted(Counter(new).values()) == [128, 128]


def test_spread_needs_a_worker():
    with pytest.raises(ValueError, match="at least one worker"):
        spread("orders", 8, [])
