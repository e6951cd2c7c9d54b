"""Options of one Later task backend alias, from ``TASKS[alias]["OPTIONS"]``."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from . import backoff as backoff_module
from .exceptions import InvalidArgument

BACKEND_PATH = "later_django.backend.LaterBackend"
NAME_RE = re.compile(r"^[A-Za-z0-9_.:-]{1,100}$")
DAY = 86400.0
MAX_SECONDS = 100 * 365.25 * DAY


@dataclass(frozen=True)
class LogPolicy:
    """How workers keep a topic's retained log: compaction, and cleanup by age (seconds)."""

    compact: bool = False
    retention_seconds: float | None = None


@dataclass(frozen=True)
class BackendOptions:
    """A Later backend alias's parsed OPTIONS: the plain value the engine's functions take.

    ``alias`` is the ``TASKS`` alias they belong to, named in messages and in
    the ``backend`` of the results read back.
    """

    alias: str = "default"
    namespace: str = "default"
    database: str = "default"
    lease_seconds: float = 30.0
    max_attempts: int = 1
    backoff: backoff_module.BackoffPolicy = field(default_factory=backoff_module.Exponential)
    retention_seconds: float = 7 * DAY
    topics: dict[str, int] = field(default_factory=dict)  # name: partition count
    keep_last: dict[str, int] = field(
        default_factory=dict
    )  # name: finished jobs kept per partition
    schedules: dict[str, dict[str, Any]] = field(default_factory=dict)
    log_upkeep: dict[str, LogPolicy] = field(default_factory=dict)  # name: retained-log policy


KNOWN = {f for f in BackendOptions.__dataclass_fields__} - {"alias", "keep_last", "log_upkeep"}
TOPIC_KEYS = ("partitions", "keep_last", "log_compact", "log_retention")


def _number(options: dict[str, Any], name: str, default: float, minimum: float) -> float:
    value = options.get(name, default)
    # NaN compares false with everything and a huge value overflows datetime arithmetic
    # only when a worker stores an outcome, so both are refused here.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not minimum <= value <= MAX_SECONDS
    ):
        raise InvalidArgument(
            f"OPTIONS[{name!r}] is {value!r}; it must be a number of seconds from {minimum:g} "
            f"to {MAX_SECONDS:.0f} (100 years)."
        )
    return float(value)


def validate_name(kind: str, value: Any) -> str:
    if not isinstance(value, str) or not NAME_RE.match(value):
        raise InvalidArgument(
            f"{kind} is {value!r}; it must be 1-100 characters of letters, digits, '_', '.', ':' "
            "or '-'."
        )
    return value


def _whole(value: Any, low: int, high: int | None = None) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and low <= value
        and (high is None or value <= high)
    )


def _log_policy(name: str, spec: dict[str, Any]) -> LogPolicy | None:
    """A topic's retained-log upkeep from its ``log_compact`` and ``log_retention`` keys."""
    compact, retention = spec.get("log_compact", False), spec.get("log_retention")
    where = f"OPTIONS['topics'][{name!r}]"
    if not isinstance(compact, bool):
        raise InvalidArgument(
            f"{where}['log_compact'] is {compact!r}; it must be True (workers keep only the "
            "newest record of each key below every group's offset) or False."
        )
    if retention is not None and (
        isinstance(retention, bool)
        or not isinstance(retention, int | float)
        or not 0 <= retention <= MAX_SECONDS
    ):
        raise InvalidArgument(
            f"{where}['log_retention'] is {retention!r}; it must be a number of seconds from 0 "
            f"to {MAX_SECONDS:.0f} (records older than that are deleted below every group's "
            "offset), or None to keep them."
        )
    if not compact and retention is None:
        return None
    return LogPolicy(compact, None if retention is None else float(retention))


def _topics(topics: Any) -> tuple[dict[str, int], dict[str, int], dict[str, LogPolicy]]:
    """Partition counts, history bounds and retained-log policies from ``{name: count}``
    or ``{name: {...}}``."""
    if not isinstance(topics, dict):
        raise InvalidArgument(
            f"OPTIONS['topics'] is {topics!r}; it must be a dict of name: partition count "
            "(or name: {'partitions': count, 'keep_last': n})."
        )
    counts: dict[str, int] = {}
    bounds: dict[str, int] = {}
    policies: dict[str, LogPolicy] = {}
    for name, spec in topics.items():
        validate_name("Topic name", name)
        where = f"OPTIONS['topics'][{name!r}]"
        if isinstance(spec, dict):
            unknown = sorted(set(spec) - set(TOPIC_KEYS), key=repr)
            if unknown or "partitions" not in spec:
                raise InvalidArgument(
                    f"{where} is {spec!r}; a topic's dict takes 'partitions' (required), "
                    "'keep_last', 'log_compact' and 'log_retention'."
                )
            count, bound = spec["partitions"], spec.get("keep_last")
            if policy := _log_policy(name, spec):
                policies[name] = policy
            where += "['partitions']"
            if bound is not None and not _whole(bound, 1):
                raise InvalidArgument(
                    f"OPTIONS['topics'][{name!r}]['keep_last'] is {bound!r}; it must be a whole "
                    "number >= 1 (finished jobs kept per partition), or None to keep them all."
                )
        else:
            count, bound = spec, None
        if not _whole(count, 1, 4096):
            raise InvalidArgument(
                f"{where} is {count!r}; it must be a whole number of partitions from 1 to 4096."
            )
        counts[name] = count
        if bound is not None:
            bounds[name] = bound
    return counts, bounds, policies


def parse(options: dict[str, Any], *, alias: str = "default") -> BackendOptions:
    """Validate a backend alias's OPTIONS; raise InvalidArgument naming the bad value."""
    if not isinstance(options, dict):
        raise InvalidArgument(f"OPTIONS is {options!r}; it must be a dict.")
    unknown = sorted(set(options) - KNOWN)
    if unknown:
        raise InvalidArgument(
            f"OPTIONS has unknown key {unknown[0]!r}; allowed keys are {', '.join(sorted(KNOWN))}."
        )
    namespace = validate_name("OPTIONS['namespace']", options.get("namespace", "default"))
    max_attempts = options.get("max_attempts", 1)
    if isinstance(max_attempts, bool) or not isinstance(max_attempts, int) or max_attempts < 1:
        raise InvalidArgument(
            f"OPTIONS['max_attempts'] is {max_attempts!r}; it must be a whole number >= 1."
        )
    topics, keep_last, log_upkeep = _topics(options.get("topics", {}))
    schedules = options.get("schedules", {})
    if not isinstance(schedules, dict):
        raise InvalidArgument(
            f"OPTIONS['schedules'] is {schedules!r}; it must be a dict of identifier: definition."
        )
    database = options.get("database", "default")
    if not isinstance(database, str) or not database:
        raise InvalidArgument(f"OPTIONS['database'] is {database!r}; it must be a DATABASES alias.")
    return BackendOptions(
        alias=alias,
        namespace=namespace,
        database=database,
        lease_seconds=_number(options, "lease_seconds", 30.0, 1.0),
        max_attempts=max_attempts,
        backoff=backoff_module.resolve(
            options.get("backoff", "exponential"), field="OPTIONS['backoff']"
        ),
        retention_seconds=_number(options, "retention_seconds", 7 * DAY, 0.0),
        topics=topics,
        keep_last=keep_last,
        schedules=dict(schedules),
        log_upkeep=log_upkeep,
    )


def later_aliases() -> Iterator[tuple[str, dict[str, Any]]]:
    """(alias, OPTIONS) of each Later backend alias in ``settings.TASKS``, in alias order."""
    for alias, params in getattr(settings, "TASKS", {}).items():
        if params.get("BACKEND") == BACKEND_PATH:
            yield alias, params.get("OPTIONS", {})


# alias -> (the OPTIONS dict parsed, what it parsed to): the dict is held, so a new
# one (``override_settings``) is parsed afresh and an old one's id is never reused.
_parsed: dict[str, tuple[Any, BackendOptions]] = {}


def options_for_alias(alias: str, *, needed_by: str) -> BackendOptions:
    """The parsed OPTIONS of the Later backend alias ``alias`` in ``settings.TASKS``.

    Raises InvalidArgument naming the alias when it is missing or of another kind,
    and the error of its OPTIONS when they are invalid. ``needed_by`` finishes the
    sentence of the error, e.g. "the retained log needs".
    """
    tasks = getattr(settings, "TASKS", {})
    params = tasks.get(alias)
    if params is None:
        raise InvalidArgument(
            f"backend is {alias!r}, which is not a TASKS alias; the aliases are "
            f"{', '.join(repr(a) for a in tasks) or 'none'}."
        )
    if params.get("BACKEND") != BACKEND_PATH:
        raise InvalidArgument(
            f"backend is {alias!r}, whose BACKEND is {params.get('BACKEND')!r}; {needed_by} a "
            f"backend whose BACKEND is {BACKEND_PATH!r}."
        )
    options = params.get("OPTIONS", {})
    cached = _parsed.get(alias)
    if cached is not None and cached[0] is options:
        return cached[1]
    later = parse(options, alias=alias)
    _parsed[alias] = (options, later)
    return later


def valid_options() -> Iterator[BackendOptions]:
    """The parsed OPTIONS of each Later backend alias in ``settings.TASKS``, in alias
    order; an alias whose OPTIONS are invalid is passed over (its backend reports
    them when it is used)."""
    for alias, _ in later_aliases():
        try:
            yield options_for_alias(alias, needed_by="")  # a Later alias: only OPTIONS can fail
        except InvalidArgument:
            continue


def options_for_namespace(namespace: str) -> BackendOptions | None:
    """The parsed OPTIONS of the first valid Later backend alias in ``settings.TASKS``
    whose namespace is ``namespace``; None if none is."""
    return next((later for later in valid_options() if later.namespace == namespace), None)


def configured_namespaces() -> list[str]:
    """Namespaces of the Later backend aliases in ``settings.TASKS``, in alias order."""
    seen: list[str] = []
    for _, options in later_aliases():
        namespace = options.get("namespace", "default")
        if namespace not in seen:
            seen.append(namespace)
    return seen


def configured_databases() -> list[str]:
    """``DATABASES`` aliases the Later backend aliases in ``settings.TASKS`` use, in alias order.

    ``["default"]`` when no Later backend is configured: that is where
    ``OPTIONS["database"]`` points by default, so a project that migrates
    before it configures ``TASKS`` gets the tables where they will be used.
    """
    seen: list[str] = []
    for _, options in later_aliases():
        database = options.get("database", BackendOptions.database)
        if isinstance(database, str) and database not in seen:
            seen.append(database)
    return seen or [BackendOptions.database]
