"""Django's Tasks API, from ``django.tasks`` (Django 6.0+) or the ``django-tasks`` backport.

Every module of later_django, and the tests, import the Tasks API from here
and nowhere else. Django 5.2 has no ``django.tasks``; the ``django-tasks``
package (``pip install "later-django[django52]"``) backports it under the
name ``django_tasks``, with two exceptions spelled ``InvalidTaskError`` and
``InvalidTaskBackendError``: they are exported here under Django's names.
``normalize_json``, the conversion a TaskResult applies to its arguments, is
``django.utils.json``'s from 6.0 and the backport's before.

Importing ``django.tasks`` registers its system checks and signal receivers;
the backport registers them in its AppConfig instead, so they are imported
here, and a project needs no ``"django_tasks"`` in ``INSTALLED_APPS``.
"""

from datetime import datetime
from typing import TYPE_CHECKING, Any

import django
from django.core.exceptions import ImproperlyConfigured

# The backport's branch is never type-checked: mypy reads django-stubs for 6.x.
if TYPE_CHECKING or django.VERSION >= (6, 0):
    from django.tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_QUEUE_NAME,
        Task,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task,
        task_backends,
    )
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.backends.dummy import DummyBackend
    from django.tasks.base import (
        DEFAULT_TASK_PRIORITY,
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        TaskError,
    )
    from django.tasks.checks import check_tasks
    from django.tasks.exceptions import (
        InvalidTask,
        InvalidTaskBackend,
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json

    TASKS_LOGGER = "django.tasks"  # where Django logs each task's start and finish
else:
    try:
        import django_tasks  # noqa: F401
    except ImportError as e:
        raise ImproperlyConfigured(
            f"later_django needs Django's Tasks framework, which Django "
            f"{django.get_version()} does not have: install the django-tasks backport "
            '(pip install "later-django[django52]"), or use Django 6.0 or newer.'
        ) from e
    from django_tasks import (
        DEFAULT_TASK_BACKEND_ALIAS,
        DEFAULT_TASK_QUEUE_NAME,
        TaskContext,
        TaskResult,
        TaskResultStatus,
        default_task_backend,
        task,
        task_backends,
    )
    from django_tasks.backends.base import BaseTaskBackend
    from django_tasks.backends.dummy import DummyBackend
    from django_tasks.base import (
        DEFAULT_TASK_PRIORITY,
        TASK_MAX_PRIORITY,
        TASK_MIN_PRIORITY,
        Task,
        TaskError,
    )
    from django_tasks.checks import check_tasks  # registers the check, as django.tasks does
    from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
    from django_tasks.exceptions import InvalidTaskError as InvalidTask
    from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch

    # Also connects the backport's receivers (settings changes, logging), as django.tasks does.
    from django_tasks.signals import task_enqueued, task_finished, task_started
    from django_tasks.utils import normalize_json

    TASKS_LOGGER = "django_tasks"

__all__ = [
    "DEFAULT_TASK_BACKEND_ALIAS",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "TASKS_LOGGER",
    "TASK_MAX_PRIORITY",
    "TASK_MIN_PRIORITY",
    "BaseTaskBackend",
    "DummyBackend",
    "InvalidTask",
    "InvalidTaskBackend",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "check_tasks",
    "default_task_backend",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]


# TaskResult's ``__post_init__`` passes the arguments through ``normalize_json``. The
# results later_django makes hold arguments normalised already: checked at enqueue
# (``records.check_value``) or decoded from a stored record. A bulk enqueue makes
# thousands of them, and that second pass was a sixth of its time. ``new_result`` fills
# the fields one by one instead, when TaskResult has exactly the slots named here; a
# TaskResult with other fields (another Django version) is made by its constructor.
_RESULT_FIELDS = (
    "task",
    "id",
    "status",
    "enqueued_at",
    "started_at",
    "finished_at",
    "last_attempted_at",
    "args",
    "kwargs",
    "backend",
    "errors",
    "worker_ids",
    "_return_value",
)
_SETTERS = (
    tuple(vars(TaskResult)[name].__set__ for name in _RESULT_FIELDS)
    if sorted(getattr(TaskResult, "__slots__", ())) == sorted(_RESULT_FIELDS)
    else None
)


def new_result(
    *,
    task: Task,
    id: str,
    status: TaskResultStatus,
    enqueued_at: datetime | None,
    started_at: datetime | None,
    finished_at: datetime | None,
    last_attempted_at: datetime | None,
    args: list[Any],
    kwargs: dict[str, Any],
    backend: str,
    errors: list[TaskError],
    worker_ids: list[str],
) -> TaskResult:
    """``TaskResult(...)`` for arguments that ``normalize_json`` has already passed."""
    if _SETTERS is None:
        return TaskResult(
            task=task,
            id=id,
            status=status,
            enqueued_at=enqueued_at,
            started_at=started_at,
            finished_at=finished_at,
            last_attempted_at=last_attempted_at,
            args=args,
            kwargs=kwargs,
            backend=backend,
            errors=errors,
            worker_ids=worker_ids,
        )
    # One call per field, written out: a loop over the setters cost twice as much.
    (
        set_task,
        set_id,
        set_status,
        set_enqueued_at,
        set_started_at,
        set_finished_at,
        set_last_attempted_at,
        set_args,
        set_kwargs,
        set_backend,
        set_errors,
        set_worker_ids,
        set_return_value,
    ) = _SETTERS
    result = object.__new__(TaskResult)
    set_task(result, task)
    set_id(result, id)
    set_status(result, status)
    set_enqueued_at(result, enqueued_at)
    set_started_at(result, started_at)
    set_finished_at(result, finished_at)
    set_last_attempted_at(result, last_attempted_at)
    set_args(result, args)
    set_kwargs(result, kwargs)
    set_backend(result, backend)
    set_errors(result, errors)
    set_worker_ids(result, worker_ids)
    set_return_value(result, None)  # no return value yet
    return result
