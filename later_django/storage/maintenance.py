"""Housekeeping: bounded expiry sweeps and the per-dialect WAL, VACUUM and size statements."""

from __future__ import annotations

from datetime import datetime

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

from ..exceptions import AutocommitRequired
from ..models.core import StorageRangeMember, StorageValue
from . import postgres, sqlite

# Ids per DELETE: keeps each statement far below SQLite's bound-parameter limit.
DELETE_CHUNK = 1000


def sweep_expired(using: str, limit: int, now: datetime) -> int:
    """Delete at most ``limit`` expired rows of both tables, oldest ``date_expire`` first.

    Database-wide, not per namespace: an expired row is invisible to every
    namespace, and only an unfiltered scan of the ``date_expire`` indexes
    keeps each call's work bounded by ``limit`` however many rows a
    namespace holds. Two bounded reads pick the ``limit`` oldest candidates
    across both tables; each delete re-checks the expiry, so a row refreshed
    meanwhile survives. The deletes are separate short statements, not one
    transaction, so a large backlog never holds SQLite's write lock for long.
    """
    values = (
        StorageValue.objects.using(using)
        .filter(date_expire__lte=now)
        .order_by("date_expire")
        .values_list("date_expire", "id")[:limit]
    )
    members = (
        StorageRangeMember.objects.using(using)
        .filter(date_expire__lte=now)
        .order_by("date_expire")
        .values_list("date_expire", "id")[:limit]
    )
    candidates = sorted(
        [(expire, 0, row_id) for expire, row_id in values]
        + [(expire, 1, row_id) for expire, row_id in members]
    )[:limit]
    value_ids = [row_id for _, table, row_id in candidates if table == 0]
    member_ids = [row_id for _, table, row_id in candidates if table == 1]
    deleted = 0
    for start in range(0, len(value_ids), DELETE_CHUNK):
        deleted += (
            StorageValue.objects.using(using)
            .filter(id__in=value_ids[start : start + DELETE_CHUNK], date_expire__lte=now)
            .delete()[0]
        )
    for start in range(0, len(member_ids), DELETE_CHUNK):
        deleted += (
            StorageRangeMember.objects.using(using)
            .filter(id__in=member_ids[start : start + DELETE_CHUNK], date_expire__lte=now)
            .delete()[0]
        )
    return deleted


def checkpoint_wal(using: str) -> None:
    connection = connections[using]
    if connection.vendor == "sqlite":
        require_autocommit(connection, "checkpoint_wal")
        sqlite.checkpoint_wal(connection)


def vacuum(using: str) -> None:
    connection = connections[using]
    require_autocommit(connection, "vacuum")
    if connection.vendor == "sqlite":
        sqlite.vacuum(connection)
    else:
        postgres.vacuum(connection)


def database_size(using: str) -> int:
    connection = connections[using]
    if connection.vendor == "sqlite":
        return sqlite.database_size(connection)
    return postgres.database_size(connection)


def require_autocommit(connection: BaseDatabaseWrapper, method: str) -> None:
    if connection.in_atomic_block:
        raise AutocommitRequired(
            f"{method}() was called inside transaction.atomic(using={connection.alias!r}); "
            "it must be called in autocommit mode, outside any atomic block."
        )
