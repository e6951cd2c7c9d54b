"""``LATER_REDACT``: the arguments the dashboard and admin show, after the project's callable.

Every page that shows a job's or a schedule's arguments gets them from
``redacted()``, never from the record. The callable is read live from the
setting. It fails closed: if it cannot be imported, raises, or returns
something other than ``(args, kwargs)``, the page says the arguments are
hidden and shows none of them, and the failure is logged (without the
arguments).

Only arguments pass through it. Return values, errors and tracebacks and
cancel reasons are shown as stored (cut when long, see ``present.clip``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.module_loading import import_string

from ..conf import later_settings

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShownArguments:
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    hidden: str | None = None  # why none of them are shown


def redacted(task_path: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> ShownArguments:
    """The arguments of a call of ``task_path`` as a page may show them."""
    path = later_settings.redact
    if path is None:
        return ShownArguments(list(args), dict(kwargs))
    try:
        redact = import_string(path)
        result = redact(task_path, list(args), dict(kwargs))
        shown_args, shown_kwargs = _checked(result)
    except Exception as e:  # fail closed: whatever went wrong, show nothing
        logger.exception("LATER_REDACT callable %s failed task=%s", path, task_path)
        return ShownArguments(
            hidden=f"arguments hidden: the redaction callable failed ({type(e).__name__})"
        )
    return ShownArguments(shown_args, shown_kwargs)


def _checked(result: Any) -> tuple[list[Any], dict[str, Any]]:
    """``result`` as (args, kwargs); TypeError when it is not a pair of a sequence and a dict."""
    if (
        isinstance(result, tuple | list)
        and len(result) == 2
        and isinstance(result[0], list | tuple)
        and isinstance(result[1], dict)
    ):
        return list(result[0]), dict(result[1])
    raise TypeError(
        f"LATER_REDACT returned {type(result).__name__}; it must return (args, kwargs), "
        "a list and a dict."
    )
