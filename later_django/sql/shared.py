"""What both databases' job-state SQL modules provide, and the columns they share."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..engine.enqueue import NewJob

# The most commands one claim takes. A claim, and a batch of outcomes, costs about
# the same for one job as for many: 48 drained no-op jobs about 1.5x as fast as 16.
BATCH = 48
# Fewer ready commands than this are claimed one at a time, so workers share them.
SHARE_AT = 16

INDEX_COLUMNS = (
    "namespace, job_id, task_path, queue_name, priority, stage, revision, attempts, "
    "enqueued_at, run_at, transitioned_at, topic, partition, sequence, parent_job_id"
)


class Dialect(Protocol):
    # Whether one hot statement (an enqueue, a claim, a batch of plain outcomes)
    # is atomic alone, so that outside a transaction it runs in autocommit.
    ALONE: bool
    # Appended to a SELECT that must lock the rows it reads until the transaction
    # ends; empty where the write transaction already excludes every other writer.
    LOCK: str
    # The same, for a SELECT from ``later_partition_head h`` joined to other tables.
    LOCK_HEAD: str
    # The same, passing over rows another transaction has locked (claims, upkeep).
    SKIP_LOCKED: str

    def insert_jobs(self, cursor: Any, namespace: str, jobs: Sequence[NewJob]) -> None:
        """Write the record, index row and (if runnable now) queue command of each job."""

    def claim(
        self,
        cursor: Any,
        namespace: str,
        owner: str,
        queues: list[str] | None,
        now: datetime,
        expires: datetime,
        room: int,
    ) -> list[tuple]:
        """Lease ready commands to ``owner``: (job id, enqueued at, ready at, epoch,
        previous owner, record bytes) for each, in claim order."""

    def mark_parents(
        self, cursor: Any, namespace: str, ids: list[str], now: datetime
    ) -> list[tuple]:
        """Mark live parents as having children, locking their rows: (job id, stage,
        topic, partition) for each found."""

    def record_outcomes(
        self,
        cursor: Any,
        namespace: str,
        owner: str,
        plans: list,
        now: datetime,
        expire_at: datetime,
        honoured: bool,
    ) -> tuple[set[str], set[str]]:
        """Store outcomes in the caller's transaction, fenced by lease: the ids stored,
        and (unless ``honoured``) those left unstored because a cancel was asked for,
        for the caller to honour and store again with ``honoured``."""

    def record_alone(
        self,
        cursor: Any,
        namespace: str,
        owner: str,
        plans: list,
        now: datetime,
        expire_at: datetime,
    ) -> tuple[set[str], set[str]]:
        """Where ``ALONE``: store plain outcomes in one autocommit statement; return the
        ids stored and the ids left for a transaction (children to settle, or a cancel
        to honour)."""

    def notify_queued(self, cursor: Any, namespace: str) -> None:
        """Wake the namespace's idle workers at once for jobs that have no queue
        command (ordered jobs), if the database can; otherwise they look soon."""

    def notify_cancel(self, cursor: Any, namespace: str) -> None:
        """Tell the namespace's workers at once that a cancel was asked for, if the
        database can; otherwise they find it at their next look."""
