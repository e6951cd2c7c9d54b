"""The enqueue write path: a job's record, its index row and its queue command.

Everything goes through the caller's connection, so inside
``transaction.atomic()`` the job commits or rolls back with the caller's data.
On PostgreSQL any number of jobs is one statement (three inserts in one CTE,
over arrays for many jobs); on SQLite, three ``executemany`` calls in one
transaction (``sql.postgres`` and ``sql.sqlite``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from ..db import one_statement
from ..records import JobRecord
from ..sql import dialect
from ..states import Stage


@dataclass
class NewJob:
    record: JobRecord
    stage: Stage  # as created (states.TRANSITIONS[None]), or cancelled at once
    run_at: datetime
    enqueued_at: datetime


def insert_jobs(namespace: str, jobs: Sequence[NewJob], *, using: str) -> None:
    """Write new jobs in the caller's transaction (or a transaction of their own)."""
    if not jobs:
        return
    with one_statement(using) as cursor:
        dialect(cursor.db).insert_jobs(cursor, namespace, jobs)
