"""The stored job record: what ``JobRecord.encode`` writes and ``decode`` reads back."""

import msgpack
import pytest

from later_django.exceptions import PayloadDecodeError, SerializationError
from later_django.records import RECORD_VERSION, Attempt, ErrorEntry, JobRecord, NewRecords, Note


def plain_record(**fields) -> JobRecord:
    values = dict(
        id="01jbrecord0000000000000000",
        task_path="tests.tasks.add",
        args=[1, [2, 3]],
        kwargs={"b": {"c": None}},
        queue_name="default",
        priority=0,
        backend="default",
        enqueued_at=1_700_000_000_000_000,
    )
    values.update(fields)
    return JobRecord(**values)


def test_a_plain_record_stores_only_what_differs_from_the_defaults():
    data = msgpack.unpackb(plain_record().encode())
    assert data == {
        "id": "01jbrecord0000000000000000",
        "task_path": "tests.tasks.add",
        "args": [1, [2, 3]],
        "kwargs": {"b": {"c": None}},  # an argument's None is kept
        "queue_name": "default",
        "priority": 0,
        "backend": "default",
        "enqueued_at": 1_700_000_000_000_000,
        "max_attempts": 1,
        "v": RECORD_VERSION,
    }
    assert JobRecord.decode(msgpack.packb(data)) == plain_record()
    ran = plain_record(attempts=[Attempt(worker_id="w:1", started_at=5)], return_value=0)
    data = msgpack.unpackb(ran.encode())
    assert data["attempts"] == [
        {"worker_id": "w:1", "started_at": 5, "finished_at": None, "outcome": None}
    ]
    assert data["return_value"] == 0
    assert "errors" not in data


def test_release_0_1_0_reads_a_record_without_its_default_fields():
    # 0.1.0 decodes a record as this: its map, with attempts, errors and notes
    # defaulting to empty, the rest to the dataclass's defaults. A worker of that
    # release still running during an upgrade reads the jobs this one enqueues.
    data = msgpack.unpackb(plain_record(topic="orders", partition=2).encode())
    data["attempts"] = [Attempt(**a) for a in data.get("attempts", [])]
    data["errors"] = [ErrorEntry(**e) for e in data.get("errors", [])]
    data["notes"] = [Note(**n) for n in data.get("notes", [])]
    data.pop("v")
    assert JobRecord(**data) == plain_record(topic="orders", partition=2)


def test_every_field_survives_encoding():
    record = plain_record(
        attempts=[Attempt(worker_id="w:1", started_at=5, finished_at=9, outcome="error")],
        errors=[ErrorEntry(exception_class_path="builtins.ValueError", traceback="tb", at=9)],
        notes=[Note(at=10, text="retried by hand")],
        cancel_requested_at=11,
        decode_error="was not msgpack",
        original_bytes=b"\xc1",
        return_value={"ok": True},
        topic="orders",
        partition=3,
        sequence=7,
    )
    assert JobRecord.decode(record.encode()) == record
    assert JobRecord.decode(plain_record().encode()) == plain_record()


def test_a_field_this_release_does_not_know_is_left_out_and_a_missing_one_is_an_error():
    data = msgpack.unpackb(plain_record().encode())
    # A record written by a newer release, read while a rolling upgrade runs.
    assert JobRecord.decode(msgpack.packb({**data, "added_later": 1})) == plain_record()
    del data["task_path"]
    with pytest.raises(PayloadDecodeError, match="task_path"):
        JobRecord.decode(msgpack.packb(data), job_id="j1")


def test_new_records_encode_byte_for_byte_as_the_record_does():
    # A bulk enqueue packs what its jobs share once; a stored record must not depend on
    # which way it was written.
    shared = dict(
        task_path="tests.tasks.add",
        queue_name="emails",
        priority=-20,
        backend="other",
        enqueued_at=1_700_000_000_000_000,
        run_after=1_700_000_000_500_000,
        max_attempts=4,
        timeout=2.5,
    )
    records = NewRecords(JobRecord(id="", args=[], kwargs={}, **shared))
    calls = [
        ([], {}),
        ([1, "two", 3.0, None, True], {"a": [1, {"b": "é" * 300}]}),
        (["x" * 70_000], {f"k{i}": i for i in range(20)}),
        ([2**64 - 1, -(2**63)], {"nested": {"deep": [[[]]]}}),
    ]
    for number, (args, kwargs) in enumerate(calls):
        record = JobRecord(id=f"01jbnewrecord{number:013d}", args=args, kwargs=kwargs, **shared)
        assert records.encode(record) == record.encode()
        assert JobRecord.decode(records.encode(record)) == record


def test_new_records_name_the_job_whose_arguments_cannot_be_packed():

    records = NewRecords(plain_record(id="", args=[], kwargs={}))
    with pytest.raises(SerializationError, match="job 01jbbad cannot be stored as msgpack"):
        records.encode(plain_record(id="01jbbad", args=[object()]))
    good = plain_record(id="01jbgood")
    assert records.encode(good) == good.encode()  # the packer starts afresh after an error
