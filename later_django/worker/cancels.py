"""A worker's side of cancelling running jobs: hearing of requests.

``cancelling.cancel`` marks a running job's index row (``cancel_requested_at``)
and, on PostgreSQL, sends ``NOTIFY later_cancel``. The worker reads the marks
of the jobs it holds at each heartbeat (and at once when notified), and sets
each job's in-memory flag, which the task's context reads for free. Past
``LATER_CANCEL_GRACE`` the main loop interrupts the job (``runner.py``).

Whatever the worker knew, the outcome decides with the mark itself, in the
transaction that stores it (``engine/honouring.py``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from ..db import connection_for, retrying

if TYPE_CHECKING:
    from .runner import Worker

logger = logging.getLogger(__name__)


def requested(namespace: str, owner: str, *, using: str) -> list[str]:
    """The jobs ``owner`` holds whose cancel has been requested."""
    with connection_for(using).cursor() as cursor:
        cursor.execute(
            "SELECT e.job_id FROM later_job_execution e JOIN later_jobs_index i "
            "ON i.namespace = e.namespace AND i.job_id = e.job_id "
            "WHERE e.namespace = %s AND e.owner = %s AND i.cancel_requested_at IS NOT NULL",
            [namespace, owner],
        )
        return [row[0] for row in cursor.fetchall()]


def deliver(worker: Worker, grace: float) -> list[str]:
    """Set the cancel flag of every job this worker runs or holds whose cancel was asked.

    One query, only while the worker holds jobs. Returns the ids newly flagged.
    """
    with worker.lock:
        if not worker.running:
            return []
    ids = retrying(
        lambda: requested(worker.namespace, worker.id, using=worker.using),
        what="cancel requests",
        using=worker.using,
    )
    now = time.monotonic()
    flagged, wake = [], False
    with worker.lock:
        for job_id in ids:
            running = worker.running.get(job_id)
            if running is None or running.item.cancel.is_set():
                continue
            running.item.cancel.set()
            running.cancel_seen_at = now
            flagged.append(job_id)
            wake = wake or now + grace < worker.waiting_until or running.slot is None
    for job_id in flagged:
        logger.info("cancel requested for job id=%s; it has %gs to stop", job_id, grace)
    if wake:
        worker.wake.set()  # the main loop's wait would outlast the grace
    return flagged
