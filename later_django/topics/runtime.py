"""How a worker takes part in topics: ``TopicParticipation``, an object each worker owns.

The worker (``worker/runner.py``), its services and its outcome writer each
call it in one line: to register the topics at start, to claim partition
heads in turns with the delivery queue, to renew the leases of the heads it
runs, and for the partitions' upkeep duties. A job without a topic meets
none of it beyond that claim turn.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from django.db import DatabaseError

from ..conf import later_settings
from ..db import retrying
from . import history, upkeep
from .assignment import Assignment
from .claiming import PartitionClaimed, claim_heads, unheld_heads
from .registry import register_topics

if TYPE_CHECKING:
    from ..engine.claiming import Claimed
    from ..worker.runner import Worker
    from ..worker.services import Services

logger = logging.getLogger(__name__)

# Once a look for due partition heads finds none, a worker that is running jobs
# looks again at most this often (an idle worker looks at every wake-up): on a
# namespace busy with ordinary jobs, the look would otherwise cost a statement
# for every other claim.
HEADS_RECHECK_SECONDS = 0.05


class TopicParticipation:
    """One worker's part in the topics of its namespace, and the state it keeps for them."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.assignment = Assignment(worker.namespace, worker.id, worker.using)
        self.turn = 0
        self.none_due_at: float | None = None  # when the last look that found no head began
        self.hint_at = 0.0  # when an ordered job's outcome was last stored
        self.history_after: tuple[str, int] | None = None  # the last partition trimmed

    def start(self) -> None:
        """Register the backend's topics before the worker claims anything.

        Raises TopicLayoutMismatch when a topic's stored partition count differs
        from the configured one, so a misconfigured worker never starts.
        """
        worker = self.worker
        topics = retrying(
            lambda: register_topics(worker.backend.later),
            what="topic registration",
            using=worker.using,
        )
        logger.info(
            "topics registered namespace=%s %s",
            worker.namespace,
            " ".join(f"{name}={count}" for name, count in sorted(topics.items())),
        )

    def claim(self, free: int, claim_queue: Callable[[int], list[Claimed]]) -> list[Claimed]:
        """Claim up to ``free`` jobs: partition heads and delivery-queue commands, in turns.

        Which of the two goes first alternates, so neither starves the other when
        both have more work than the worker has room for.
        """
        self.turn += 1
        with self.worker.lock:
            idle = not self.worker.running
        # An idle worker claims commands first: the plain job that woke it then starts
        # while heads are looked for, and the look is skipped if one was made lately.
        heads_first = self.turn % 2 and not idle
        steps = (self._heads, claim_queue) if heads_first else (claim_queue, self._heads)
        claimed: list[Claimed] = []
        for step in steps:
            if free - len(claimed) > 0:
                try:
                    claimed += step(free - len(claimed))
                except DatabaseError as e:
                    if not claimed:
                        raise
                    # The first step's jobs are leased to this worker: raising past them
                    # would leave them to nobody (see engine.claiming.unheld).
                    logger.warning(
                        "a claim failed after %s job(s) were claimed; running those error=%s",
                        len(claimed),
                        e,
                    )
        return claimed

    def unheld(self, held: set[str]) -> list[Claimed]:
        """Partition heads leased to this worker that it does not hold (a claim that
        committed although the worker saw it fail)."""
        worker = self.worker
        return list(
            retrying(
                lambda: unheld_heads(worker.namespace, worker.id, held, using=worker.using),
                what="unheld partition heads",
                using=worker.using,
            )
        )

    def _heads(self, room: int) -> list[Claimed]:
        worker = self.worker
        with worker.lock:
            running = set(worker.running)
        began = time.monotonic()
        if (
            running
            and self.none_due_at is not None
            and self.hint_at < self.none_due_at
            and began - self.none_due_at < HEADS_RECHECK_SECONDS
        ):
            return []
        preference = retrying(
            self.assignment.current, what="partition assignment", using=worker.using
        )
        found = retrying(
            lambda: claim_heads(
                worker.namespace,
                worker.id,
                free=room,
                lease_seconds=worker.backend.later.lease_seconds,
                preference=preference,
                queues=worker.config.queues,
                running=running,
                using=worker.using,
            ),
            what="partition claim",
            using=worker.using,
        )
        self.none_due_at = None if found else began
        return list(found)

    def heads_may_be_due(self) -> None:
        """Look for due heads at the next claim: an ordered job's outcome was just stored."""
        self.hint_at = time.monotonic()

    def heartbeat(self) -> None:
        """Renew the partition leases of the heads this worker is running, and of those
        whose outcomes it has not yet stored (the database may be refusing them): until it
        is stored, a finished head's partition is still this worker's, and a lease lapsed
        meanwhile would let another worker run the head again."""
        worker = self.worker
        with worker.lock:
            busy = bool(worker.outcomes.unstored_heads) or any(
                isinstance(r.item, PartitionClaimed) for r in worker.running.values()
            )
        if busy:
            retrying(
                lambda: upkeep.renew(
                    worker.namespace,
                    worker.id,
                    lease_seconds=worker.backend.later.lease_seconds,
                    using=worker.using,
                ),
                what="partition lease renewal",
                using=worker.using,
            )

    def duties(self, services: Services) -> None:
        """Truncate rows behind heads and heal headless partitions, once per heartbeat
        interval; trim the history of topics with ``keep_last`` once per sweep interval."""
        if not services.due("partitions", later_settings.heartbeat_interval):
            return
        worker = self.worker
        ns, using = worker.namespace, worker.using
        removed = retrying(
            lambda: upkeep.truncate(ns, using=using), what="partition truncation", using=using
        )
        healed = retrying(
            lambda: upkeep.heal(ns, using=using), what="partition healing", using=using
        )
        if removed or healed:
            logger.info(
                "partitions tidied namespace=%s truncated=%s healed=%s", ns, removed, healed
            )
            worker.wake.set()
        keep_last = worker.backend.later.keep_last
        if keep_last and services.due("partition history", later_settings.sweep_interval):
            self.trim_history(keep_last)

    def trim_history(self, keep_last: dict[str, int]) -> None:
        """Delete finished jobs beyond each bounded topic's ``keep_last``, a bounded turn at
        a time."""
        worker = self.worker
        deleted, self.history_after = retrying(
            lambda: history.trim(
                worker.namespace,
                keep_last,
                self.history_after,
                batch=later_settings.sweep_batch,
                using=worker.using,
            ),
            what="partition history",
            using=worker.using,
        )
        if deleted:
            logger.info(
                "partition history trimmed namespace=%s deleted=%s", worker.namespace, deleted
            )


def wait_mode(item: Claimed) -> str:
    """The queue-wait metric a claimed job counts under."""
    return "sequential" if isinstance(item, PartitionClaimed) else "regular"
