"""``later_django.task``: Django's ``@task`` decorator plus Later's task options.

Django 6.1's ``@task`` passes extra keywords on to the backend's ``task_class``,
so ``@task(max_attempts=3)`` reaches ``LaterTask``; Django 6.0's passes none.
This decorator takes the same arguments as Django's and Later's options by
name, and builds the backend's Task itself, so it works on every supported
version.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, overload

from .backend import LaterTask
from .tasks_api import (
    DEFAULT_TASK_BACKEND_ALIAS,
    DEFAULT_TASK_PRIORITY,
    DEFAULT_TASK_QUEUE_NAME,
    task_backends,
)


@overload
def task(function: Callable[..., Any], /) -> LaterTask: ...


@overload
def task(
    *,
    priority: int = DEFAULT_TASK_PRIORITY,
    queue_name: str = DEFAULT_TASK_QUEUE_NAME,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    max_attempts: int | None = None,
    backoff: Any = None,
    timeout: float | None = None,
    topic: str | None = None,
    atomic: bool = False,
) -> Callable[[Callable[..., Any]], LaterTask]: ...


def task(
    function: Callable[..., Any] | None = None,
    *,
    priority: int = DEFAULT_TASK_PRIORITY,
    queue_name: str = DEFAULT_TASK_QUEUE_NAME,
    backend: str = DEFAULT_TASK_BACKEND_ALIAS,
    takes_context: bool = False,
    max_attempts: int | None = None,
    backoff: Any = None,
    timeout: float | None = None,
    topic: str | None = None,
    atomic: bool = False,
) -> LaterTask | Callable[[Callable[..., Any]], LaterTask]:
    """Make ``function`` a Task of ``backend``, with Later's options; use as ``@task(...)``.

    ``priority``, ``queue_name``, ``backend`` and ``takes_context`` are Django's;
    ``max_attempts``, ``backoff``, ``timeout``, ``topic`` and ``atomic`` are
    Later's (see docs/configuration.md and docs/exactly-once.md). Bad values
    raise Django's ``InvalidTask`` when the task is defined. Later's options
    need a Later backend: naming one for an alias whose tasks cannot take them
    raises ``TypeError``.
    """
    later_options = {
        name: value
        for name, value in [
            ("max_attempts", max_attempts),
            ("backoff", backoff),
            ("timeout", timeout),
            ("topic", topic),
            ("atomic", atomic or None),
        ]
        if value is not None
    }

    def wrapper(f: Callable[..., Any]) -> LaterTask:
        task_class = task_backends[backend].task_class
        if later_options and not issubclass(task_class, LaterTask):
            given = ", ".join(f"{name}={value!r}" for name, value in later_options.items())
            raise TypeError(
                f"later_django.task got {given} for task backend {backend!r}, whose "
                f"{task_class.__name__} takes no Later options; use them with a backend "
                'whose BACKEND is "later_django.backend.LaterBackend".'
            )
        made = task_class(
            func=f,
            priority=priority,
            queue_name=queue_name,
            backend=backend,
            takes_context=takes_context,
            run_after=None,
            **later_options,
        )
        return made  # type: ignore[return-value]  # a LaterTask whenever options were given

    if function:
        return wrapper(function)
    return wrapper
