"""Each database's job-state SQL, behind one interface.

The engine's modules decide what happens to a job; the statements that make
it happen differ by database and live here, one module per database:
``postgres`` (a claim, an enqueue or a batch of outcomes is one statement over
arrays, run alone in autocommit when the caller has no transaction open) and
``sqlite`` (a few statements in one write transaction, since SQLite has one
writer at a time). :func:`dialect` picks the one for a connection; both meet
the :class:`~later_django.sql.shared.Dialect` protocol, which mypy checks.
"""

from __future__ import annotations

from typing import Any

from ..db import is_postgres
from . import postgres, sqlite
from .shared import Dialect

# Typed as the protocol, so that mypy checks each module against it.
POSTGRES: Dialect = postgres
SQLITE: Dialect = sqlite


def dialect(connection: Any) -> Dialect:
    """The job-state SQL for ``connection``'s database."""
    return POSTGRES if is_postgres(connection) else SQLITE
