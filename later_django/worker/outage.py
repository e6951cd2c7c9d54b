"""A database that refuses the worker's claims: the worker keeps running and pauses its claims.

Running jobs go on; claiming is tried again after a pause that doubles from
``FIRST_PAUSE`` up to ``MOST_PAUSE``, and the first claim that goes through
ends the outage. The log says when it began, each failed try, and when it ended.
"""

from __future__ import annotations

import logging
import time

# Its lines keep the logger they have always had, which operators filter on.
logger = logging.getLogger("later_django.worker.runner")

# After the database refuses a claim (once the retries of transient errors are
# spent: a restart, a failover, a lock held for long), the worker waits this
# long before it tries again, doubling up to the most, and keeps running.
FIRST_PAUSE = 0.5
MOST_PAUSE = 10.0


class Outage:
    """When claims began to fail, and when the next one may be tried (main thread only)."""

    def __init__(self) -> None:
        self.since: float | None = None  # monotonic time of the first failed claim
        self.pause = 0.0
        self.resume_at = 0.0  # no claim before this monotonic time

    def claim_failed(self, error: Exception) -> None:
        """A claim failed for good: log it and pause claiming for longer than last time."""
        now = time.monotonic()
        if self.since is None:
            self.since = now
            self.pause = FIRST_PAUSE
            logger.error(
                "cannot claim jobs: the database failed error=%s; running jobs go on, and "
                "claiming is tried again every few seconds",
                error,
            )
        else:
            self.pause = min(self.pause * 2, MOST_PAUSE)
            logger.warning("still cannot claim jobs after %.0fs error=%s", now - self.since, error)
        self.resume_at = now + self.pause

    def claim_went_through(self) -> None:
        """End the outage, if there was one."""
        if self.since is not None:
            logger.warning(
                "claiming again: the database answered after %.0fs", time.monotonic() - self.since
            )
            self.since = None
