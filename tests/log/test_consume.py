"""``Consumer.consume``: a handler's writes and its group's offset commit land in one transaction.

In-process tests show what is committed when the handler returns, raises or
loses its partition; the kill test SIGKILLs consumer processes again and
again while they handle records and counts each record's effect: exactly one.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from django.db import connection

from later_django.exceptions import InvalidArgument, LeaseLost
from later_django.log import Consumer, append_many, committed_offsets
from later_django.log.records import Record
from tests.conftest import ROOT, worker_env
from tests.models import Execution

pytestmark = pytest.mark.django_db(transaction=True)


def fill(count: int) -> None:
    append_many("events", [(f"key-{i % 16}", str(i).encode()) for i in range(count)])


def effects(group: str) -> list[str]:
    return list(Execution.objects.filter(kind=f"effect:{group}").values_list("value", flat=True))


def writer(group: str, fail: bool = False):
    """A handler that writes one row per record, then raises if ``fail``."""

    def handle(records: list[Record]) -> None:
        Execution.objects.bulk_create(
            Execution(kind=f"effect:{group}", value=f"{r.partition}:{r.offset}", pid=0, at=0)
            for r in records
        )
        if fail:
            raise RuntimeError("the handler failed after writing")

    return handle


def test_the_handlers_writes_and_the_offsets_past_its_records_commit_together():
    fill(40)
    with Consumer("billing", "events", member_id="a") as consumer:
        assert consumer.consume(writer("billing"), max_records=1000) == 40
        assert consumer.consume(writer("billing")) == 0  # nothing waits: not called
    assert len(effects("billing")) == 40
    assert sum(committed_offsets("billing", "events").values()) == 40


def test_a_handler_that_raises_leaves_neither_its_writes_nor_a_commit_and_sees_them_again():
    fill(12)
    with Consumer("billing", "events", member_id="a") as consumer:
        with pytest.raises(RuntimeError, match="the handler failed after writing"):
            consumer.consume(writer("billing", fail=True), max_records=1000)
        assert effects("billing") == []
        assert committed_offsets("billing", "events") == {}
        assert consumer.consume(writer("billing"), max_records=1000) == 12  # the same records
    assert sorted(effects("billing")) == sorted(
        f"{p}:{o}" for p, end in committed_offsets("billing", "events").items() for o in range(end)
    )
    assert len(effects("billing")) == 12


def test_a_handler_that_is_not_callable_is_refused():
    with (
        Consumer("billing", "events", member_id="a") as consumer,
        pytest.raises(InvalidArgument, match=r"^handler is 3; it must be a callable"),
    ):
        consumer.consume(3)  # type: ignore[arg-type]


@pytest.mark.skipif(
    connection.vendor != "postgresql",
    reason="PostgreSQL only: on SQLite the handler's transaction holds the one write lock, so "
    "no other member can take a partition over meanwhile",
)
def test_a_member_that_lost_its_partition_while_handling_keeps_nothing():
    fill(8)
    slow = Consumer("billing", "events", member_id="slow", session_seconds=1)
    taken = threading.Event()

    def take_over() -> None:
        try:
            other = Consumer("billing", "events", member_id="fast", session_seconds=1)
            while not other.partitions:
                time.sleep(0.1)
                other.poll(max_records=1)
            taken.set()
        finally:
            connection.close()

    def handle(records: list[Record]) -> None:
        writer("billing")(records)
        thread = threading.Thread(target=take_over)
        thread.start()  # the slow member's session lapses while it handles
        thread.join(timeout=30)
        assert taken.is_set()

    with pytest.raises(LeaseLost):
        slow.consume(handle, max_records=1000)
    assert effects("billing") == []
    assert committed_offsets("billing", "events") == {}


@pytest.mark.process
def test_members_killed_again_and_again_apply_each_records_effect_exactly_once():
    total = 1000  # about 100 handler calls: more than one member's life between kills
    fill(total)

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.log.consumer_process", "killed", "events"],
            cwd=ROOT,
            env=worker_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def consumed() -> int:
        return sum(committed_offsets("killed", "events").values())

    kills = 0
    deadline = time.monotonic() + 120
    while consumed() < total and kills < 12 and time.monotonic() < deadline:
        member = start()
        time.sleep(random.uniform(0.8, 2.0))
        member.send_signal(signal.SIGKILL)
        member.wait(timeout=10)
        kills += 1
    last = start()
    try:
        while consumed() < total and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        last.send_signal(signal.SIGKILL)
        last.wait(timeout=10)

    assert consumed() == total
    assert kills >= 3, kills  # else most records were consumed by the member never killed
    applied = effects("killed")
    assert len(applied) == len(set(applied)) == total
