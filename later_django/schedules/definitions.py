"""What a schedule is, checked before it is stored: identifier, cron, task, arguments.

Definitions come from ``later_django.schedule()`` or from
``TASKS[alias]["OPTIONS"]["schedules"]``; either way every bad part is refused
here, naming it, so a worker never meets a schedule it cannot run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.core import checks

from ..aliases import later_options
from ..exceptions import InvalidArgument, LaterError, SerializationError
from ..options import BackendOptions, validate_name
from ..records import check_arguments, pack
from ..results import resolve_task
from ..tasks_api import InvalidTask, Task
from .cron import check_cron

SETTINGS_KEYS = ("cron", "task", "args", "kwargs", "sequential")


@dataclass(frozen=True)
class Definition:
    identifier: str
    cron: str
    task_path: str
    args: list[Any]
    kwargs: dict[str, Any]
    sequential: bool
    queue_name: str
    priority: int
    origin: str  # "code" or "settings"

    def payload(self) -> bytes:
        return pack(
            {
                "args": self.args,
                "kwargs": self.kwargs,
                "queue_name": self.queue_name,
                "priority": self.priority,
            },
            what=f"schedule {self.identifier}",
        )


def later_backend(alias: str) -> BackendOptions:
    """The parsed OPTIONS of a TASKS alias's Later backend; InvalidArgument for any other."""
    return later_options(alias, needed_by="schedules need")


def _task(task: Any, field: str, alias: str | None) -> Task:
    if isinstance(task, str):
        try:
            task = resolve_task(task, exact=False)  # a re-exported name is fine here
        except LaterError as e:
            raise InvalidArgument(f"{field} is {task!r}; {e}") from e
    elif not isinstance(task, Task):
        raise InvalidArgument(
            f"{field} is {task!r}; it must be a Task (a function decorated with "
            "django.tasks.task) or its dotted path."
        )
    try:
        return task.using(backend=alias) if alias is not None else task
    except InvalidTask as e:
        raise InvalidArgument(f"{field} is {task.module_path!r}, which is not valid: {e}") from e


def define(
    identifier: Any,
    cron: Any,
    task: Any,
    args: Any,
    kwargs: Any,
    *,
    sequential: Any,
    origin: str,
    backend: str | None = None,
    prefix: str = "",
) -> tuple[BackendOptions, Definition]:
    """Check every part of a schedule; return its backend and definition.

    ``backend`` (a TASKS alias) overrides the task's own; ``prefix`` names the
    setting a declared schedule comes from, so that errors name the setting.
    """

    def name(part: str) -> str:
        return f"{prefix}[{part!r}]" if prefix else part

    validate_name(f"The identifier of {prefix}" if prefix else "identifier", identifier)
    cron = check_cron(cron, field=name("cron"))
    found = _task(task, name("task"), backend)
    later = later_backend(found.backend)
    topic = getattr(found, "topic", None)
    if topic is not None:
        raise InvalidArgument(
            f"{name('task')} is {found.module_path!r}, which is ordered by topic {topic!r}; a "
            "schedule runs plain tasks (sequential=True keeps occurrences from overlapping)."
        )
    if not isinstance(sequential, bool):
        raise InvalidArgument(f"{name('sequential')} is {sequential!r}; it must be True or False.")
    if not isinstance(args, list | tuple):
        raise InvalidArgument(f"{name('args')} is {args!r}; it must be a list.")
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise InvalidArgument(f"{name('kwargs')} is {kwargs!r}; it must be a dict of str keys.")
    try:
        checked_args, checked_kwargs = check_arguments(found.module_path, args, kwargs)
    except SerializationError as e:
        raise SerializationError(f"{prefix}: {e}" if prefix else str(e)) from e
    return later, Definition(
        identifier=identifier,
        cron=cron,
        task_path=found.module_path,
        args=checked_args,
        kwargs=checked_kwargs,
        sequential=sequential,
        queue_name=found.queue_name,
        priority=found.priority,
        origin=origin,
    )


def declared(later: BackendOptions) -> list[Definition]:
    """The schedules declared in a backend alias's OPTIONS, checked; InvalidArgument if not."""
    found = []
    for identifier, spec in later.schedules.items():
        prefix = f"TASKS[{later.alias!r}]['OPTIONS']['schedules'][{identifier!r}]"
        if not isinstance(identifier, str):
            prefix = f"TASKS[{later.alias!r}]['OPTIONS']['schedules']"
        if not isinstance(spec, dict):
            raise InvalidArgument(
                f"{prefix} is {spec!r}; it must be a dict with 'cron' and 'task' and optionally "
                "'args', 'kwargs' and 'sequential'."
            )
        unknown = sorted(set(spec) - set(SETTINGS_KEYS), key=str)
        if unknown:
            raise InvalidArgument(
                f"{prefix} has unknown key {unknown[0]!r}; allowed keys are "
                f"{', '.join(SETTINGS_KEYS)}."
            )
        for required in ("cron", "task"):
            if required not in spec:
                raise InvalidArgument(f"{prefix} has no {required!r}; it is required.")
        _, definition = define(
            identifier,
            spec["cron"],
            spec["task"],
            spec.get("args", []),
            spec.get("kwargs", {}),
            sequential=spec.get("sequential", False),
            origin="settings",
            backend=later.alias,
            prefix=prefix,
        )
        found.append(definition)
    return found


def check_declared(later: BackendOptions) -> list[checks.CheckMessage]:
    """System check: every schedule declared in the backend's OPTIONS is valid (later.E010)."""
    try:
        declared(later)
    except InvalidArgument as e:
        return [
            checks.Error(
                str(e),
                hint="See docs/workflows.md for the form of a declared schedule.",
                id="later.E010",
            )
        ]
    return []
