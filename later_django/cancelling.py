"""``later_django.cancel()``: cancel a job by its id or its ``TaskResult``.

It checks its arguments and finds the backend alias's namespace; the engine
does the rest (``engine/cancelling.py``).
"""

from __future__ import annotations

from .aliases import later_options
from .engine.cancelling import cancel_by_id
from .exceptions import InvalidArgument
from .states import Stage
from .tasks_api import DEFAULT_TASK_BACKEND_ALIAS, TaskResult

REASON_LENGTH = 2000
DEFAULT_REASON = "Cancelled through later_django.cancel()."


def cancel(
    result_id: str | TaskResult,
    *,
    reason: str | None = None,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
) -> Stage:
    """Cancel a job; return ``Stage.CANCELLED`` if it ended now, ``Stage.RUNNING`` if asked.

    A job that has not started ends cancelled at once, with ``reason`` kept
    and its waiting continuations cancelled. A running job is asked to stop:
    its task sees ``context.cancel_requested``, is interrupted if it runs on
    past ``LATER_CANCEL_GRACE``, and ends cancelled (unless it had already
    returned when the request reached its worker: then its success stands).
    Asking again while it runs changes nothing. Raises JobNotFound for an
    unknown (or expired) id and InvalidTransition for a finished job.
    """
    later = later_options(backend, needed_by="cancel() needs")
    job_id = _job_id(result_id)
    if reason is not None and (not isinstance(reason, str) or len(reason) > REASON_LENGTH):
        raise InvalidArgument(
            f"reason is {reason!r}; it must be a string of at most {REASON_LENGTH} "
            "characters, or None."
        )
    return cancel_by_id(job_id, namespace=later.namespace, reason=reason or DEFAULT_REASON)


def _job_id(value: object) -> str:
    if isinstance(value, TaskResult):
        value = value.id
    if not isinstance(value, str) or not value:
        raise InvalidArgument(
            f"result_id is {value!r}; it must be a job's id (a string) or its TaskResult."
        )
    return value
