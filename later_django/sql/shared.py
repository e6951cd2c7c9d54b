"""What both databases' job-state SQL modules provide, and the columns they share."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol

from ..db import to_db
from ..states import FINISHED, Stage, sql_list

if TYPE_CHECKING:
    from ..engine.enqueue import NewJob
    from ..topics.assignment import Preference

# The most commands one claim takes. A claim, and a batch of outcomes, costs about
# the same for one job as for many: 48 drained no-op jobs about 1.5x as fast as 16.
BATCH = 48
# Fewer ready commands than this are claimed one at a time, so workers share them.
SHARE_AT = 16


def left_over(ready: int, taken: int) -> bool:
    """Whether a claim that saw ``ready`` commands (at most ``BATCH``) and took ``taken``
    may have left any ready: it took fewer than it saw (one of a short queue, or as
    many as it had room for), or it saw a full batch and there can be more behind it.

    A worker claims again at once only when this is true. Otherwise its next claim
    waits for a wake-up (a commit's notification, a free slot) or its poll, as it
    would after an empty claim; the empty claim it saves would also hold the
    interpreter while the slot that was just handed a job wants to start it.
    """
    return taken < ready or ready >= BATCH


INDEX_COLUMNS = (
    "namespace, job_id, task_path, queue_name, priority, stage, revision, attempts, "
    "enqueued_at, run_at, transitioned_at, topic, partition, sequence, parent_job_id"
)


def stored_record(job_id: str, namespace: str) -> str:
    """A job's stored record, read by one probe of the record's unique key: a scalar
    subquery of the expressions ``job_id`` and ``namespace``.

    A subquery rather than a join: a join leaves the plan to the planner's
    statistics, and on a ``later_storage`` not yet analysed since it filled it
    hashed every record of the namespace for each claim (a drain of 10,000 fresh
    jobs read two million rows). A subquery on both columns of a unique key is
    one index probe per job whatever the statistics say.
    """
    return (
        f"(SELECT s.value FROM later_storage AS s WHERE s.namespace = {namespace} "
        f"AND s.key = 'job:' || {job_id})"
    )


# Two rows of one partition: ``SAME_PARTITION.format(a="h", b="j")``.
SAME_PARTITION = (
    '{a}.namespace = {b}.namespace AND {a}.topic = {b}.topic AND {a}."partition" = {b}."partition"'
)

# A list parameter as one SQL parameter, so that the statement's text (and plan)
# stays the same whatever the list's length: (the test, the parameter).
Membership = Callable[[Sequence[str]], tuple[str, Any]]


def pick_heads(
    connection: Any,
    namespace: str,
    now: datetime,
    room: int,
    preference: Preference,
    queues: list[str] | None,
    running: set[str],
    *,
    one_of: Membership,
    none_of: Membership,
    lock: str,
) -> tuple[str, list[Any]]:
    """The statement that picks up to ``room`` runnable heads (preferred partitions
    first), and those whose job already ended: (id, topic, partition, sequence, job id,
    available at, stage, enqueued at) for each."""
    stamp = to_db(connection, now)
    params: list[Any] = [namespace, stamp, stamp]
    extra, order = "", ""
    order_params: list[Any] = []
    if queues:
        test, value = one_of(queues)
        extra += (
            f" AND (j.queue_name IS NULL OR j.stage IN ({sql_list(FINISHED)}) "
            f"OR j.queue_name {test})"
        )
        params.append(value)
    if running:
        test, value = none_of(sorted(running))
        extra += f" AND h.job_id {test}"
        params.append(value)
    if not preference.everything:
        test, value = one_of(sorted(preference.tokens))
        mine = f"(h.topic || ':' || h.\"partition\") {test}"
        steal_before = now - timedelta(seconds=preference.steal_after)
        extra += f" AND ({mine} OR h.available_at <= %s)"
        params += [value, to_db(connection, steal_before)]
        order = f"CASE WHEN {mine} THEN 0 ELSE 1 END, "
        order_params.append(value)
    return (
        'SELECT h.id, h.topic, h."partition", h.sequence, h.job_id, h.available_at, j.stage, '
        "j.enqueued_at FROM later_partition_head h "
        "LEFT JOIN later_partition_lease l ON l.namespace = h.namespace AND l.topic = h.topic "
        'AND l."partition" = h."partition" '
        "LEFT JOIN later_jobs_index j ON j.namespace = h.namespace AND j.job_id = h.job_id "
        f"WHERE h.namespace = %s AND (h.available_at <= %s OR j.stage = '{Stage.CANCELLED}') "
        "AND (l.owner IS NULL OR l.expires_at IS NULL OR l.expires_at <= %s) "
        f"AND (j.stage IS NULL OR j.stage <> '{Stage.WAITING}'){extra} "
        f"ORDER BY {order}h.available_at, h.id LIMIT %s{lock}",
        [*params, *order_params, room],
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

    def insert_batches(
        self, cursor: Any, namespace: str, batches: Iterable[Sequence[NewJob]]
    ) -> None:
        """Write every batch's jobs, in the cursor's transaction: on PostgreSQL a statement
        a batch, sent without waiting for the last one's result; on SQLite all at once."""

    def claim(
        self,
        cursor: Any,
        namespace: str,
        owner: str,
        queues: list[str] | None,
        now: datetime,
        expires: datetime,
        room: int,
    ) -> tuple[list[tuple], bool]:
        """Lease ready commands to ``owner``: (job id, enqueued at, ready at, epoch,
        previous owner, record bytes) for each, in claim order; and whether ready
        commands may be left that it did not take (:func:`left_over`)."""

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

    def execute_each(self, cursor: Any, statement: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run ``statement`` once per row of parameters, in the cursor's transaction.

        What ``executemany`` does, except that on PostgreSQL each statement is sent
        and answered before the next: psycopg's ``executemany`` runs in pipeline
        mode, where the server waits for the rest of the pipeline without counting
        the wait as idle, so a worker stopped in the middle would keep the
        transaction's row locks past the idle-transaction limit (``db.py``).
        """

    def notify_queued(self, cursor: Any, namespace: str) -> None:
        """Wake the namespace's idle workers at once (at commit) for jobs just made
        runnable, if the database can; otherwise they look soon. The enqueue and
        outcome statements wake them themselves; every other writer of queue
        commands or partition heads calls this."""

    def notify_cancel(self, cursor: Any, namespace: str) -> None:
        """Tell the namespace's workers at once that a cancel was asked for, if the
        database can; otherwise they find it at their next look."""

    # -- partition heads (topics) --------------------------------------------------------

    # Deletes up to %(limit)s partition rows behind their heads in namespace %(ns)s.
    TRUNCATE: str

    def take_heads(
        self,
        cursor: Any,
        namespace: str,
        owner: str,
        now: datetime,
        expires: datetime,
        room: int,
        preference: Preference,
        queues: list[str] | None,
        running: set[str],
    ) -> tuple[list[tuple], list[tuple[tuple, tuple]]]:
        """Pick runnable heads, lease their partitions and jobs to ``owner`` and mark the
        jobs running: every picked row (see ``pick_heads``; heads whose job ended are
        among them, untaken), and for each taken head (its picked row, (job id, enqueued
        at, ready at, epoch, previous owner, record bytes))."""

    def held_partitions(
        self, cursor: Any, namespace: str, places: list[tuple[str, int]]
    ) -> set[tuple[str, int]]:
        """Those of ``places`` whose sequence row an uncommitted producer holds, so their
        next row may be invisible yet; none where writers are serialised."""

    def next_rows(
        self, cursor: Any, namespace: str, places: list[tuple[str, int]], now: datetime
    ) -> list[tuple]:
        """The first queued row of each of ``places`` that has one: (topic, partition,
        sequence, job id, available at no earlier than ``now``)."""

    # -- upkeep ----------------------------------------------------------------------------

    # Whether stage counts gather as deltas that ``fold_counts`` moves into the totals.
    COUNT_DELTAS: bool

    def fold_counts(self, cursor: Any) -> None:
        """Move every pending stage-count delta into the totals, in the cursor's
        transaction."""

    def lock_for_recount(self, cursor: Any, timeout_ms: int) -> None:
        """Keep every writer of the index out until the transaction ends, waiting at
        most ``timeout_ms`` for the lock; nothing where the write transaction already
        excludes them."""

    def analyze_stale(self, cursor: Any, tables: Sequence[str], slack: int) -> list[str]:
        """Refresh the planner statistics of those ``tables`` never analysed, or holding
        more than twice the rows they had at their last analysis (plus ``slack``), or
        (where the planner counts them) the pages; return them."""
