"""The public schedule API: ``schedule``, ``unschedule``, pause and resume, ``list_schedules``.

Each runs on the connection of the task backend's database, so inside
``transaction.atomic()`` a schedule commits or rolls back with the caller's
data, like an enqueue.
"""

from __future__ import annotations

from typing import Any

from ..tasks_api import DEFAULT_TASK_BACKEND_ALIAS, Task
from . import control
from .definitions import define, later_backend
from .store import ScheduleInfo, read_all, remove, save


def schedule(
    identifier: str,
    cron: str,
    task: Task | str,
    /,
    *args: Any,
    sequential: bool = False,
    **kwargs: Any,
) -> ScheduleInfo:
    """Create or replace the schedule ``identifier``: call ``task(*args, **kwargs)`` on ``cron``.

    ``task`` is a task (optionally with ``using(priority=, queue_name=,
    backend=)`` applied, which the schedule keeps) or its dotted path.
    ``cron`` has 5 fields, or 6 with a leading seconds field, evaluated in
    ``settings.TIME_ZONE``. With ``sequential=True`` occurrences never
    overlap: one that falls due while the previous one is unfinished waits
    for it. Replacing a schedule with the same cron string keeps its next run
    time. Raises InvalidArgument (or SerializationError) naming the bad part.
    """
    backend, definition = define(
        identifier, cron, task, args, kwargs, sequential=sequential, origin="code"
    )
    return save(backend.namespace, definition, using=backend.database)


def unschedule(identifier: str, *, backend: str = DEFAULT_TASK_BACKEND_ALIAS) -> bool:
    """Remove the schedule ``identifier``; return whether there was one.

    Occurrences already enqueued still run. A schedule declared in settings
    comes back when a worker next starts, unless its declaration is removed.
    """
    later = later_backend(backend)
    return remove(later.namespace, identifier, using=later.database)


def pause_schedule(identifier: str, *, backend: str = DEFAULT_TASK_BACKEND_ALIAS) -> ScheduleInfo:
    """Stop the schedule ``identifier`` from firing until ``resume_schedule()``.

    Occurrences already enqueued still run. The pause is stored with the
    schedule: scheduling or declaring it again keeps it paused. Raises
    ScheduleNotFound when there is no such schedule.
    """
    later = later_backend(backend)
    return control.pause(later.namespace, identifier, using=later.database)


def resume_schedule(identifier: str, *, backend: str = DEFAULT_TASK_BACKEND_ALIAS) -> ScheduleInfo:
    """Let a paused schedule fire again from its first cron time after now.

    Runs missed while paused are not made up. Resuming a schedule that is not
    paused changes nothing. Raises ScheduleNotFound when there is no such schedule.
    """
    later = later_backend(backend)
    return control.resume(later.namespace, identifier, using=later.database)


def list_schedules(*, backend: str = DEFAULT_TASK_BACKEND_ALIAS) -> list[ScheduleInfo]:
    """Every schedule of the backend's namespace, by identifier, with its next run time."""
    later = later_backend(backend)
    return read_all(later.namespace, using=later.database)
