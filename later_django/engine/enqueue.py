"""The enqueue write path: a job's record, its index row and its queue command.

Everything goes through the caller's connection, so inside
``transaction.atomic()`` the job commits or rolls back with the caller's data.
On PostgreSQL a batch of jobs is one statement (three inserts in one CTE,
over arrays for many jobs); on SQLite, three ``executemany`` calls in one
transaction (``sql.postgres`` and ``sql.sqlite``). A bulk enqueue of more than
``STREAMED_BATCH`` jobs goes in batches of that size, in one transaction
(:func:`insert_batches`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from ..db import one_statement, write_transaction
from ..records import JobRecord
from ..sql import dialect
from ..states import Stage

# Jobs per statement of a bulk enqueue that goes in batches. Smaller batches let the
# database start sooner and wait less for the last one; each costs a statement.
STREAMED_BATCH = 500


@dataclass
class NewJob:
    record: JobRecord
    stage: Stage  # as created (states.TRANSITIONS[None]), or cancelled at once
    run_at: datetime
    enqueued_at: datetime
    # The record's bytes when its builder made them (see records.NewRecords); None
    # to encode the record as it is when the job is written.
    value: bytes | None = None

    def encoded(self) -> bytes:
        return self.value if self.value is not None else self.record.encode()


def insert_jobs(namespace: str, jobs: Sequence[NewJob], *, using: str) -> None:
    """Write new jobs in the caller's transaction (or a transaction of their own)."""
    if not jobs:
        return
    with one_statement(using) as cursor:
        dialect(cursor.db).insert_jobs(cursor, namespace, jobs)


def insert_batches(namespace: str, batches: Iterable[Sequence[NewJob]], *, using: str) -> None:
    """Write batches of new jobs, built as they are asked for, in one transaction.

    On PostgreSQL each batch's statement is sent without waiting for the last
    one's result (pipeline mode), so the server writes one batch while the
    caller builds the next. A bulk enqueue then takes about as long as the
    slower of the two, not their sum. Inside a caller's transaction the batches
    go in a savepoint: an error raised while they are written or built (a bad
    call found by the caller's check of a later batch) undoes them all and
    leaves the caller's transaction usable.
    """
    with write_transaction(using, savepoint=True, hot=True) as cursor:
        dialect(cursor.db).insert_batches(cursor, namespace, batches)
