"""What task code learns from its context (``@task(takes_context=True)``).

Django's ``TaskContext`` gives the task its ``TaskResult`` and attempt; a
Later worker passes a ``LaterTaskContext``, which adds ``cancel_requested``
(ordered jobs get its subclass ``PartitionTaskContext``, with their place in
the partition and its fencing epoch).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from .tasks_api import TaskContext


@dataclass(frozen=True, slots=True, kw_only=True)
class LaterTaskContext(TaskContext):  # type: ignore[misc]
    """The TaskContext of a job run by a Later worker.

    ``cancel_requested`` turns true once a cancel of the job
    (``later_django.cancel()`` or the dashboard) has reached the worker: at
    its next heartbeat (``LATER_HEARTBEAT_INTERVAL``), or at once on
    PostgreSQL. Reading it costs no query: the worker sets a flag in memory.
    A task that sees it should stop soon, by returning or raising; the job
    then ends cancelled. One that runs on past ``LATER_CANCEL_GRACE`` is
    interrupted.
    """

    _cancelled: threading.Event = field(default_factory=threading.Event, repr=False, compare=False)

    @property
    def cancel_requested(self) -> bool:
        """Whether someone asked to cancel this job while it runs."""
        return self._cancelled.is_set()
