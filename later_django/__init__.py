"""Durable background jobs for Django, kept in the project's own database."""

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
    "unschedule",
]

if TYPE_CHECKING:
    from .cancelling import cancel
    from .schedules.api import (
        list_schedules,
        pause_schedule,
        resume_schedule,
        schedule,
        unschedule,
    )

_LAZY = {"list_schedules", "pause_schedule", "resume_schedule", "schedule", "unschedule"}


def __getattr__(name: str) -> Any:
    # Imported on first use: these need the app registry (models, task backends), and
    # the package is imported (from settings, for instance) before apps are ready.
    if name in _LAZY:
        from .schedules import api

        return getattr(api, name)
    if name == "cancel":
        from .cancelling import cancel

        return cancel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
