"""Routing keys to partitions and partitions to workers: stable, documented functions."""

import subprocess
import sys

import pytest

from later_django import partition_for_key
from later_django.exceptions import InvalidArgument
from later_django.topics.assignment import rendezvous_owner
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


def test_a_joining_worker_takes_only_partitions_that_move_to_it():
    before = ["worker-a", "worker-b", "worker-c"]
    after = [*before, "worker-d"]
    moved = 0
    for partition in range(256):
        old = rendezvous_owner("orders", partition, before)
        new = rendezvous_owner("orders", partition, after)
        if old != new:
            assert new == "worker-d"
            moved += 1
    assert 40 < moved < 90  # about a quarter


def test_a_dying_worker_hands_only_its_own_partitions_to_the_survivors():
    live = ["worker-a", "worker-b", "worker-c"]
    survivors = ["worker-a", "worker-c"]
    for partition in range(256):
        old = rendezvous_owner("orders", partition, live)
        if old != "worker-b":
            assert rendezvous_owner("orders", partition, survivors) == old
