"""Honouring cancel requests in the transaction that stores a running job's outcome.

``cancelling.cancel`` marks a running job's index row (``cancel_requested_at``);
the worker hears of it and flags the job (``worker/cancels.py``). Whatever
the worker knew, the outcome decides with the mark itself: the outcome
statements lock the index rows first, so a request committed before them is
always seen, and ``honour`` gives such an outcome what the request asks, in
the transaction that stores it:

* an attempt that failed, was retried or released ends ``cancelled``, not
  retried, with the request's reason;
* a job that returned after the flag had reached it ended ``cancelled``
  already (``worker/executing.py``); one that returned before it did keeps
  its success, and its history says that the cancel came too late.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..db import placeholders
from ..exceptions import PayloadDecodeError
from ..records import JobRecord, Note, job_key, to_micros
from .attempt import CANCELLED, RELEASE, SUCCESS, Outcome, planned

DEFAULT_REASON = "Cancelled while it ran."


def honour_plans(cursor: Any, namespace: str, plans: list, flagged: set[str], now) -> list:
    """Honour the cancels of the ``flagged`` jobs' outcomes, re-planning them in ``plans``
    (outcomes.py's (outcome, stage, run_at, terminal) tuples); return their new plans."""
    honour(cursor, namespace, [p[0] for p in plans if p[0].job_id in flagged], now)
    plans[:] = [planned(p[0], now) if p[0].job_id in flagged else p for p in plans]
    return [p for p in plans if p[0].job_id in flagged]


def honour(cursor: Any, namespace: str, outcomes: list[Outcome], now: datetime) -> None:
    """Turn the outcomes of jobs with a cancel request into what the request asks.

    Runs in the transaction that stores them, with their index rows locked;
    reads each request's reason and time from the job's stored record, which
    the cancel wrote and the outcome is about to replace.
    """
    requests = _stored_requests(cursor, namespace, [o.job_id for o in outcomes])
    for outcome in outcomes:
        reason, at = requests.get(outcome.job_id, (None, None))
        at = at or to_micros(now) or 0
        record = outcome.record
        if outcome.kind == SUCCESS:
            if record is not None:
                record.cancel_requested_at = at
                record.notes.append(
                    Note(
                        to_micros(now) or 0,
                        f"cancel requested ({reason or DEFAULT_REASON}) reached the job after "
                        "it had returned: its success stands",
                    )
                )
            continue
        outcome.released = outcome.released or outcome.kind == RELEASE
        outcome.kind, outcome.retry_at = CANCELLED, None
        if record is not None:
            record.cancel_reason = reason or DEFAULT_REASON
            record.cancel_requested_at = at


def _stored_requests(
    cursor: Any, namespace: str, job_ids: list[str]
) -> dict[str, tuple[str | None, int | None]]:
    if not job_ids:
        return {}
    cursor.execute(
        "SELECT key, value FROM later_storage "
        f"WHERE namespace = %s AND key IN ({placeholders(len(job_ids))})",
        [namespace, *[job_key(job_id) for job_id in job_ids]],
    )
    found: dict[str, tuple[str | None, int | None]] = {}
    for key, raw in cursor.fetchall():
        try:
            record = JobRecord.decode(bytes(raw), job_id=key[4:])
        except PayloadDecodeError:
            continue
        found[key[4:]] = (record.cancel_reason, record.cancel_requested_at)
    return found
