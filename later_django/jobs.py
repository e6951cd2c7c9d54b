"""Operations on one job by id, for user code and the admin: ``get_job``,
``retry_job``, ``cancel_job``, ``delete_job``. They live in the engine
(``engine/jobs.py``); this module is their public name, and finds the task
backend of a namespace for the dashboard (``backend_for``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from .aliases import options_of
from .engine.jobs import JobView, cancel_job, delete_job, get_job, retry_job
from .exceptions import JobNotFound
from .tasks_api import task_backends

if TYPE_CHECKING:
    from .backend import LaterBackend

__all__ = ["JobView", "backend_for", "cancel_job", "delete_job", "get_job", "retry_job"]


def backend_for(namespace: str) -> LaterBackend:
    """The Later backend whose jobs live in ``namespace``; JobNotFound if none does."""
    for backend in task_backends.all():
        later = options_of(backend)
        if later is not None and later.namespace == namespace:
            return cast("LaterBackend", backend)
    raise JobNotFound(f"No Later task backend uses namespace {namespace!r}.")
