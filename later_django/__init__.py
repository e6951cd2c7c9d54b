"""Durable background jobs for Django, kept in the project's own database."""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .topics.routing import partition_for_key

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "cancel",
    "list_schedules",
    "partition_for_key",
    "pause_schedule",
    "resume_schedule",
    "schedule",
    "task",
    "unschedule",
]

if TYPE_CHECKING:
    from .cancelling import cancel
    from .decorator import task
    from .schedules.api import (
        list_schedules,
        pause_schedule,
        resume_schedule,
        schedule,
        unschedule,
    )

_LAZY = {
    "cancel": "cancelling",
    "list_schedules": "schedules.api",
    "pause_schedule": "schedules.api",
    "resume_schedule": "schedules.api",
    "schedule": "schedules.api",
    "task": "decorator",
    "unschedule": "schedules.api",
}


def __getattr__(name: str) -> Any:
    # Imported on first use: the schedule API and the task decorator need the app
    # registry, and the package is imported (from settings, for instance) before
    # apps are ready.
    if name in _LAZY:
        return getattr(import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
