"""Topics and their fixed partition counts: declared in OPTIONS, registered in ``later_topic``.

A topic's partition count decides where every key goes, so every producer and
worker must agree on it. The first process to see a topic stores its count;
from then on a process configured with another count is refused with
TopicLayoutMismatch. Changing a live topic's count is an explicit step,
``change_partition_count``, run from a migration once the topic is drained.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from django.db import transaction
from django.utils import timezone

from ..db import connection_for, placeholders, to_db, write_transaction
from ..exceptions import InvalidArgument, InvalidTransition, TopicLayoutMismatch, UnknownTopic

if TYPE_CHECKING:
    from ..options import BackendOptions

# Reserved topics every backend alias has without declaring them. Sequential
# schedules run their occurrences through "later.schedules", keyed by schedule.
RESERVED_TOPICS: dict[str, int] = {"later.schedules": 16}

_verified: set[tuple[str, str, str, int]] = set()
_verified_lock = threading.Lock()


def topics_of(later: BackendOptions) -> dict[str, int]:
    """Every topic of a backend alias, declared and reserved, with its partition count."""
    declared = later.topics
    for name in RESERVED_TOPICS:
        if name in declared:
            raise InvalidArgument(
                f"OPTIONS['topics'] declares {name!r}; that name is reserved by later_django "
                "and must not be declared."
            )
    return {**declared, **RESERVED_TOPICS}


def partition_count(later: BackendOptions, name: str) -> int:
    """The configured partition count of topic ``name``; UnknownTopic if it has none."""
    known = topics_of(later)
    if name not in known:
        declared = ", ".join(repr(t) for t in sorted(later.topics)) or "none"
        raise UnknownTopic(
            f"Topic {name!r} is not declared in TASKS[{later.alias!r}]['OPTIONS']['topics'] "
            f"(declared topics: {declared}); declare it with its partition count."
        )
    return known[name]


def _mismatch(
    later: BackendOptions, name: str, stored: int, configured: int
) -> TopicLayoutMismatch:
    return TopicLayoutMismatch(
        f"Topic {name!r} has {stored} partitions in the database but "
        f"TASKS[{later.alias!r}]['OPTIONS']['topics'][{name!r}] is {configured}; a live "
        "topic's partition count changes only through "
        "later_django.topics.registry.change_partition_count in a migration (docs/topics.md)."
    )


def _upsert(cursor: Any, connection: Any, namespace: str, topics: dict[str, int]) -> dict[str, int]:
    now = to_db(connection, timezone.now())
    names = sorted(topics)
    cursor.execute(
        "INSERT INTO later_topic (namespace, name, partition_count, created_at) VALUES "
        + ", ".join(["(%s, %s, %s, %s)"] * len(names))
        + " ON CONFLICT (namespace, name) DO NOTHING",
        [v for name in names for v in (namespace, name, topics[name], now)],
    )
    cursor.execute(
        "SELECT name, partition_count FROM later_topic "
        f"WHERE namespace = %s AND name IN ({placeholders(len(names))})",
        [namespace, *names],
    )
    return dict(cursor.fetchall())


def register_topics(later: BackendOptions) -> dict[str, int]:
    """Store every topic of ``backend`` not stored yet; raise if a stored count differs.

    Runs at worker start and after ``migrate``; returns the topics checked.
    """
    topics = topics_of(later)
    with write_transaction(later.database) as cursor:
        stored = _upsert(cursor, connection_for(later.database), later.namespace, topics)
    for name, count in topics.items():
        if stored[name] != count:
            raise _mismatch(later, name, stored[name], count)
    with _verified_lock:
        _verified.update((later.database, later.namespace, n, c) for n, c in topics.items())
    return topics


def check_layout(
    cursor: Any, later: BackendOptions, name: str, count: int
) -> TopicLayoutMismatch | None:
    """Check, inside the caller's transaction, that ``name`` is stored with ``count``.

    Returns the error rather than raising it, so the caller can raise it once
    out of its write block and leave the caller's own transaction usable. A
    process checks each topic once; the check is remembered only after the
    transaction that made it commits.
    """
    key = (later.database, later.namespace, name, count)
    if key in _verified:
        return None
    stored = _upsert(cursor, connection_for(later.database), later.namespace, {name: count})
    if stored[name] != count:
        return _mismatch(later, name, stored[name], count)

    def remember() -> None:
        with _verified_lock:
            _verified.add(key)

    transaction.on_commit(remember, using=later.database)
    return None


def ensure_layout(cursor: Any, later: BackendOptions, name: str, count: int) -> None:
    """Like ``check_layout``, but raise TopicLayoutMismatch (failing the caller's block)."""
    refused = check_layout(cursor, later, name, count)
    if refused is not None:
        raise refused


def forget_layouts() -> None:
    """Drop the remembered checks, so the next enqueue checks each topic again."""
    with _verified_lock:
        _verified.clear()


def change_partition_count(
    namespace: str, name: str, count: int, *, using: str = "default"
) -> None:
    """Set a drained topic's partition count; call it from a migration's RunPython.

    Raises InvalidTransition while the topic still has queued jobs: their keys
    were routed with the old count, so they must finish first. Stop producers,
    let workers drain the topic, migrate, then deploy the new OPTIONS count.
    Processes remember the count they checked, so restart them afterwards.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= 4096:
        raise InvalidArgument(
            f"count is {count!r}; it must be a whole number of partitions from 1 to 4096."
        )
    connection = connection_for(using)
    with write_transaction(using) as cursor:
        cursor.execute(
            "SELECT COUNT(*) FROM later_partition_job WHERE namespace = %s AND topic = %s",
            [namespace, name],
        )
        queued = cursor.fetchone()[0]
        if queued:
            raise InvalidTransition(
                f"Topic {name!r} still has {queued} queued job(s); its partition count can "
                "change only once it is drained (stop producers and let workers finish)."
            )
        cursor.execute(
            "INSERT INTO later_topic (namespace, name, partition_count, created_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, name) "
            "DO UPDATE SET partition_count = excluded.partition_count",
            [namespace, name, count, to_db(connection, timezone.now())],
        )
        for table in ("later_partition_head", "later_partition_lease", "later_partition_sequence"):
            cursor.execute(
                f'DELETE FROM {table} WHERE namespace = %s AND topic = %s AND "partition" >= %s',
                [namespace, name, count],
            )
    forget_layouts()
