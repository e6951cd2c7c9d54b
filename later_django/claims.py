"""What a claim hands a worker: a ``Claimed`` job, read from its claimed row.

Both claims build these, the delivery queue's (``engine/claiming.py``) and
the partition heads' (``topics/claiming.py``); a job whose previous holder
stopped without an outcome gets its lost attempt written back at once.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DatabaseError
from django.utils import timezone

from .db import connection_for, from_db, placeholders, write_transaction
from .exceptions import PayloadDecodeError
from .records import Attempt, JobRecord, job_key, to_micros
from .sql import dialect
from .sql.shared import stored_record

logger = logging.getLogger(__name__)


@dataclass
class Claimed:
    job_id: str
    epoch: int
    enqueued_at: datetime
    available_at: datetime
    record: JobRecord | None
    decode_error: PayloadDecodeError | None = None
    claimed_at: datetime = field(default_factory=timezone.now)
    owner: str = ""
    previous_owner: str | None = None  # holder of a lease that lapsed without an outcome
    raw: bytes | None = field(default=None, repr=False)  # the stored record, until load()
    undecodable: bytes | None = field(default=None, repr=False)  # what load() could not decode
    # Set once a cancel of the job reaches this worker; the task's context reads it.
    cancel: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    def load(self) -> None:
        """Decode the stored record, once, and add this claim's attempt to it.

        A worker's slots call this as a job starts, so the thread that claims
        spends its time claiming.
        """
        raw, self.raw = self.raw, None
        if raw is None:
            return
        try:
            record = JobRecord.decode(raw, job_id=self.job_id)
        except PayloadDecodeError as e:
            self.decode_error, self.undecodable = e, raw
            return
        started = to_micros(self.claimed_at) or 0
        if self.previous_owner is not None:
            # The execution lease was still there: its holder stopped without an outcome.
            record.attempts.append(
                Attempt(
                    worker_id=self.previous_owner,
                    started_at=started,
                    outcome="lost",
                    finished_at=started,
                )
            )
        record.attempts.append(Attempt(worker_id=self.owner, started_at=started))
        self.record = record


def decode_row(row: tuple, owner: str, now: datetime, *, lazy: bool = False) -> Claimed:
    """A claimed job from its row; its record is decoded now, or by ``load()`` if ``lazy``."""
    job_id, enqueued_at, ready_at, epoch, previous_owner, raw = row
    item = Claimed(
        job_id=job_id,
        epoch=epoch,
        enqueued_at=from_db(enqueued_at) or now,
        available_at=from_db(ready_at) or now,
        record=None,
        claimed_at=now,
        owner=owner,
        previous_owner=previous_owner,
        raw=None if raw is None else bytes(raw),
    )
    if raw is None:
        item.decode_error = PayloadDecodeError(
            f"Job {job_id!r} has a queue command but no stored record; it must have been "
            "deleted while queued."
        )
    elif not lazy:
        item.load()
    return item


def store_lost_attempts(namespace: str, lost: list[Claimed], using: str) -> None:
    """Write records that gained a "lost" attempt, so the loss is kept even if this worker
    dies too (the running attempt is left out: it is stored with the outcome).

    The claim has committed by now, so a database error here must not reach the
    claim's caller, which would retry the claim and leave these jobs leased to
    a worker that never received them. It is logged instead: the lost attempt
    is in each record in memory, and is stored with the job's outcome.
    """
    rows = []
    for item in lost:
        assert item.record is not None
        record = item.record
        current = record.attempts.pop()
        rows.append((record.encode(), namespace, job_key(item.job_id)))
        record.attempts.append(current)
    try:
        with write_transaction(using) as cursor:
            dialect(cursor.db).execute_each(
                cursor,
                "UPDATE later_storage SET value = %s WHERE namespace = %s AND key = %s",
                rows,
            )
    except DatabaseError as e:
        logger.warning(
            "could not store the lost attempts of %s claimed job(s) now; they are stored with "
            "the outcomes error=%s",
            len(rows),
            e,
        )


def unheld_rows(select: str, namespace: str, owner: str, held: set[str], using: str) -> list:
    """The rows ``select`` reads for each execution lease (``e``) that ``owner`` holds in the
    database and whose job is not in ``held``, oldest first."""
    params: list[Any] = [namespace, owner]
    leave_out = ""
    if held:
        leave_out = f" AND e.job_id NOT IN ({placeholders(len(held))})"
        params.extend(sorted(held))
    with connection_for(using).cursor() as cursor:
        cursor.execute(
            f"{select} WHERE e.namespace = %s AND e.owner = %s{leave_out} "
            "ORDER BY e.started_at, e.job_id",
            params,
        )
        return cursor.fetchall()


# The record of each execution lease's job, for the selects of unheld_rows.
UNHELD_RECORD = stored_record("e.job_id", "e.namespace")
