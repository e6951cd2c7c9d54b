"""The msgpack job record kept in ``later_storage`` under ``job:<id>``.

The record holds what a job *is* (task, arguments, options) and what happened
to it (attempts, errors, return value). Its current stage lives in
``later_jobs_index``, the one row every stage change updates.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgpack
from django.utils import timezone
from ulid_transform import ulid_now

from .db import django_time
from .exceptions import PayloadDecodeError, SerializationError
from .tasks_api import normalize_json

RECORD_VERSION = 1


def new_job_id() -> str:
    """A lower-case ULID: unique, and sortable by creation time to the millisecond.

    Made in C (``ulid_transform``): a pure-Python ULID cost about 4 µs, a fifth
    of what a job of a large ``enqueue_many`` costs its caller.
    """
    return ulid_now().lower()


def job_key(job_id: str) -> str:
    return f"job:{job_id}"


def to_micros(value: datetime | None) -> int | None:
    """Microseconds since the epoch; a naive ``value`` is local time, as Django takes it."""
    if value is None:
        return None
    if value.tzinfo is not UTC and timezone.is_naive(value):  # timezone.now() is UTC
        value = timezone.make_aware(value)
    return int(value.timestamp() * 1_000_000)


def from_micros(value: int | None) -> datetime | None:
    """The datetime of ``value`` as Django holds datetimes under the current USE_TZ."""
    if value is None:
        return None
    return django_time(datetime.fromtimestamp(value / 1_000_000, tz=UTC))


@dataclass
class Attempt:
    worker_id: str
    started_at: int
    finished_at: int | None = None
    outcome: str | None = None  # "success", "error", "timeout", "released", "lost"


@dataclass
class ErrorEntry:
    exception_class_path: str
    traceback: str
    at: int
    worker_id: str | None = None

    @property
    def at_datetime(self) -> datetime | None:
        return from_micros(self.at)


@dataclass
class Note:
    """Something a person did to a job outside its run, for its history: when and what."""

    at: int
    text: str

    @property
    def at_datetime(self) -> datetime | None:
        return from_micros(self.at)


@dataclass
class JobRecord:
    id: str
    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    queue_name: str
    priority: int
    backend: str
    enqueued_at: int
    run_after: int | None = None
    max_attempts: int = 1
    timeout: float | None = None
    attempts: list[Attempt] = field(default_factory=list)
    errors: list[ErrorEntry] = field(default_factory=list)
    return_value: Any = None
    finished_at: int | None = None
    stage: str | None = None
    parent_id: str | None = None
    topic: str | None = None
    partition_key: str | None = None
    partition: int | None = None
    sequence: int | None = None
    cancel_reason: str | None = None
    # When a cancel of the job was asked for while it ran (microseconds), until it ends.
    cancel_requested_at: int | None = None
    schedule: str | None = None
    # Set on a stand-in for a record that could not be decoded: why, and the bytes it replaced.
    decode_error: str | None = None
    original_bytes: bytes | None = None
    # Actions taken from outside the job's run (the dashboard's triage desk), oldest first.
    notes: list[Note] = field(default_factory=list)

    @property
    def worker_ids(self) -> list[str]:
        return [a.worker_id for a in self.attempts]

    def encode(self) -> bytes:
        return pack(self._stored_fields(), what=f"job {self.id}")

    def _stored_fields(self) -> dict[str, Any]:
        # The fields that differ from their defaults: a None and an empty list are what
        # decode (this release's and 0.1.0's) fills in for a field that is absent, and
        # leaving them out halves a new job's record, its names being most of its bytes.
        # Read from __dict__: dataclasses.asdict deep-copies every value and was the
        # costliest step of storing an outcome.
        data = {name: value for name, value in self.__dict__.items() if value is not None}
        if self.attempts:
            data["attempts"] = [a.__dict__ for a in self.attempts]
        else:
            del data["attempts"]
        if self.errors:
            data["errors"] = [e.__dict__ for e in self.errors]
        else:
            del data["errors"]
        if self.notes:
            data["notes"] = [n.__dict__ for n in self.notes]
        else:
            del data["notes"]
        data["v"] = RECORD_VERSION
        return data

    @classmethod
    def decode(cls, raw: bytes, *, job_id: str = "?") -> JobRecord:
        try:
            data = msgpack.unpackb(raw, raw=False, strict_map_key=False)
            if not isinstance(data, dict):
                raise TypeError(f"expected a map, got {type(data).__name__}")
            data.pop("v", None)
            data["attempts"] = [Attempt(**a) for a in data.get("attempts", [])]
            data["errors"] = [ErrorEntry(**e) for e in data.get("errors", [])]
            data["notes"] = [Note(**n) for n in data.get("notes", [])]
            try:
                return cls(**data)
            except TypeError:  # a field this release does not know: leave it out
                return cls(**{k: v for k, v in data.items() if k in _RECORD_FIELD_SET})
        except Exception as e:
            # msgpack raises some errors (FormatError) with no message at all.
            cause = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
            raise PayloadDecodeError(
                f"Stored record of job {job_id!r} cannot be decoded ({cause}); "
                "it must be a msgpack map written by later_django."
            ) from e


_RECORD_FIELDS = tuple(JobRecord.__dataclass_fields__)
_RECORD_FIELD_SET = frozenset(_RECORD_FIELDS)

# The fields in which the new jobs of one enqueue call differ.
_PER_CALL = ("id", "args", "kwargs")


class NewRecords:
    """Encodes the records of one enqueue call's new jobs, byte for byte as
    :meth:`JobRecord.encode` does, with what they share packed once.

    A new record's fields but its id and arguments are the same for every job
    of a call, and packing a map of two dozen fields was the largest part of a
    bulk enqueue's work per job (4.4 µs); this packs three values between the
    shared bytes (0.4 µs). Not for sharing between threads (it holds one packer).
    """

    def __init__(self, model: JobRecord) -> None:
        self._packer = packer = msgpack.Packer(use_bin_type=True)
        fields = model._stored_fields()
        parts: list[bytes | str] = [packer.pack_map_header(len(fields))]
        for name, value in fields.items():
            try:
                parts.append(packer.pack(name))
                parts.append(name if name in _PER_CALL else packer.pack(value))
            except (TypeError, ValueError, OverflowError) as e:
                packer.reset()
                raise SerializationError(
                    f"job field {name} cannot be stored as msgpack: {e}."
                ) from e
        merged: list[bytes | str] = []
        for part in parts:  # neighbouring constant parts as one
            if isinstance(part, bytes) and merged and isinstance(merged[-1], bytes):
                merged[-1] += part
            else:
                merged.append(part)
        # The record's fields start with its id, then come its arguments (the dataclass's
        # order): shared bytes, id, shared bytes, args, shared bytes, kwargs, shared bytes.
        if [p for p in merged if isinstance(p, str)] != list(_PER_CALL) or len(merged) != 7:
            raise RuntimeError(
                f"JobRecord's fields are not laid out as NewRecords expects: {merged}"
            )
        self._shared = tuple(p for p in merged if isinstance(p, bytes))

    def encode(self, record: JobRecord) -> bytes:
        """The bytes of ``record``, which must differ from the model only in its id,
        args and kwargs."""
        head, before_args, before_kwargs, tail = self._shared
        pack_one = self._packer.pack
        try:
            return b"".join(
                (
                    head,
                    pack_one(record.id),
                    before_args,
                    pack_one(record.args),
                    before_kwargs,
                    pack_one(record.kwargs),
                    tail,
                )
            )
        except (TypeError, ValueError, OverflowError) as e:
            self._packer.reset()
            raise SerializationError(f"job {record.id} cannot be stored as msgpack: {e}.") from e


def storable_text(text: str) -> str:
    """``text`` as a record can hold it: UTF-8.

    Python decodes bytes that are not UTF-8 into lone surrogates where it is
    told to keep them (file names from ``os.listdir``, ``sys.argv``, the
    environment), and an exception's message can carry one into a traceback.
    msgpack cannot encode such a string, so each becomes its escape (``\\udcff``).
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def scrub_text(record: JobRecord) -> None:
    """Make the free text of ``record`` storable (see ``storable_text``): its errors'
    tracebacks, its notes and its cancel reason."""
    for error in record.errors:
        error.exception_class_path = storable_text(error.exception_class_path)
        error.traceback = storable_text(error.traceback)
    for note in record.notes:
        note.text = storable_text(note.text)
    if record.cancel_reason is not None:
        record.cancel_reason = storable_text(record.cancel_reason)


def pack(value: Any, *, what: str) -> bytes:
    try:
        return msgpack.packb(value, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:
        raise SerializationError(f"{what} cannot be stored as msgpack: {e}.") from e


_MSGPACK_INT_MIN, _MSGPACK_INT_MAX = -(2**63), 2**64 - 1
ALLOWED = "JSON values: None, bool, int, float, str, and lists and dicts (with str keys) of them"


def check_value(value: Any, *, name: str, task_path: str) -> Any:
    """Return ``value`` normalised as Django's TaskResult will hold it, or raise.

    Task arguments must survive both JSON (Django's TaskResult normalises them)
    and msgpack (the stored record); the error names the argument.
    """
    if _plain_scalar(value):
        return value  # the common scalars: nothing to normalise, and both formats carry them
    try:
        normalized = normalize_json(value)
        json.dumps(normalized, allow_nan=True)
        msgpack.packb(normalized, use_bin_type=True)
    except (TypeError, ValueError, OverflowError) as e:
        raise SerializationError(
            f"Argument {name} of task {task_path!r} is {_short(value)} of type "
            f"{type(value).__name__}; task arguments must be {ALLOWED}."
        ) from e
    return normalized


def check_arguments(task_path: str, args: Any, kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
    """``args`` and ``kwargs`` as stored, or SerializationError naming the bad one.

    The common scalars pass without a call, and an argument's name is only
    spelled out for a value that needs a closer look: a bulk enqueue checks
    every argument of thousands of calls.
    """
    checked_args = []
    for i, value in enumerate(args):
        if not _plain_scalar(value):
            value = check_value(value, name=f"#{i} (positional)", task_path=task_path)
        checked_args.append(value)
    checked_kwargs = {}
    for key, value in kwargs.items():
        if not _plain_scalar(value):
            value = check_value(value, name=f"{key!r}", task_path=task_path)
        checked_kwargs[key] = value
    return checked_args, checked_kwargs


def _plain_scalar(value: Any) -> bool:
    kind = type(value)
    return (
        value is None
        or kind is bool
        or (kind is int and _MSGPACK_INT_MIN <= value <= _MSGPACK_INT_MAX)
    )


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
