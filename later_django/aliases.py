"""The parsed OPTIONS of a ``TASKS`` alias, for code that needs no backend object.

A Later backend keeps its parsed OPTIONS in ``later`` (a ``BackendOptions``,
with the alias, namespace and database). The engine's functions take that
plain value; this is where the public API, the retained log and the
schedules find it by alias, without importing the backend class.
"""

from __future__ import annotations

from .exceptions import InvalidArgument
from .options import BACKEND_PATH, BackendOptions
from .tasks_api import InvalidTaskBackend, task_backends


def options_of(backend: object) -> BackendOptions | None:
    """The parsed OPTIONS of a task backend that is a Later backend; None for another kind."""
    later = getattr(backend, "later", None)
    return later if isinstance(later, BackendOptions) else None


def later_options(alias: str, *, needed_by: str) -> BackendOptions:
    """The parsed OPTIONS of the Later backend ``alias``; InvalidArgument for any other alias.

    ``needed_by`` finishes the sentence of the error, e.g. "cancel() needs".
    """
    try:
        backend = task_backends[alias]
    except InvalidTaskBackend as e:
        raise InvalidArgument(f"backend is {alias!r}, which is not a TASKS alias.") from e
    later = options_of(backend)
    if later is None:
        raise InvalidArgument(
            f"backend is {alias!r}, a {type(backend).__name__}; {needed_by} a backend whose "
            f"BACKEND is {BACKEND_PATH!r}."
        )
    return later
