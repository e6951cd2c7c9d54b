"""What a worker is started with: its settings, its id, its backend and a checked schema."""

from __future__ import annotations

import os
import secrets
import socket
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, cast

from django.db import connections

from ..aliases import options_of
from ..exceptions import LaterError
from ..tasks_api import InvalidTaskBackend, task_backends

if TYPE_CHECKING:
    from ..backend import LaterBackend

DEFAULT_CONCURRENCY = 8


@dataclass
class WorkerConfig:
    backend: str = "default"
    concurrency: int = DEFAULT_CONCURRENCY
    queues: list[str] | None = None
    burst: bool = False
    max_jobs: int | None = None
    shutdown_timeout: float = 30.0
    health_file: str | None = None  # touched at each heartbeat
    install_signal_handlers: bool = True
    counts: Counter[str] = field(default_factory=Counter)


def new_worker_id() -> str:
    return f"{socket.gethostname()[:60]}:{os.getpid()}:{secrets.token_hex(3)}"


def later_backend(alias: str, *, needed_by: str) -> LaterBackend:
    """The Later backend of a ``TASKS`` alias; ``needed_by`` names the command in errors.

    Raises LaterError for an unknown alias or another kind of backend, and the
    backend's own error for invalid ``OPTIONS``.
    """
    try:
        backend = task_backends[alias]
    except InvalidTaskBackend as e:
        if alias in task_backends.settings:  # there, but its BACKEND does not import
            raise LaterError(f"Task backend {alias!r} cannot be loaded: {e}") from e
        raise LaterError(
            f"Task backend {alias!r} is not in settings.TASKS; its aliases are "
            f"{', '.join(task_backends.settings)}."
        ) from e
    if options_of(backend) is None:
        raise LaterError(
            f"Task backend {alias!r} is {type(backend).__name__}; {needed_by} "
            "needs one whose BACKEND is 'later_django.backend.LaterBackend'."
        )
    later = cast("LaterBackend", backend)  # its OPTIONS are Later's: a LaterBackend
    if later.options_error is not None:
        raise later.options_error
    return later


def check_schema(using: str) -> None:
    """Refuse to start on a database where the ``later`` app's migrations are not all applied."""
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connections[using])
    leaves = [node for node in executor.loader.graph.leaf_nodes() if node[0] == "later"]
    missing = [migration.name for migration, _ in executor.migration_plan(leaves)]
    if missing:
        raise LaterError(
            f"Database {using!r} has not had {len(missing)} of later_django's migrations "
            f"applied (the first is {missing[0]}), so its tables are missing or out of "
            f"date. Run: python manage.py migrate --database {using}"
        )
