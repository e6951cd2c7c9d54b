"""The stored job record: what ``JobRecord.encode`` writes and ``decode`` reads back."""

import msgpack

from later_django.records import RECORD_VERSION, Attempt, ErrorEntry, JobRecord, Note


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


def test_a_plain_record_leaves_out_the_fields_only_some_jobs_have():
    data = msgpack.unpackb(plain_record().encode())
    assert data["v"] == RECORD_VERSION
    assert (data["id"], data["args"], data["kwargs"]) == (
        "01jbrecord0000000000000000",
        [1, [2, 3]],
        {"b": {"c": None}},
    )
    assert (data["attempts"], data["errors"]) == ([], [])
    for absent in ("decode_error", "original_bytes", "notes", "cancel_requested_at"):
        assert absent not in data


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
