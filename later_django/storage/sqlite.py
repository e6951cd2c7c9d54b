"""SQLite's maintenance statements: WAL checkpoint, VACUUM and on-disk size."""

from __future__ import annotations

import logging
import os

from django.db.backends.base.base import BaseDatabaseWrapper

logger = logging.getLogger(__name__)


def checkpoint_wal(connection: BaseDatabaseWrapper) -> None:
    """Copy the write-ahead log into the database file and truncate the log to zero bytes.

    SQLite resets its log only when no reader is mid-read as a checkpoint
    finishes, which a busy worker pool rarely allows; ``TRUNCATE`` waits for
    readers (up to the busy timeout) so the file cannot grow without bound.
    Outside WAL mode the pragma does nothing.
    """
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        busy, log_frames, checkpointed = cursor.fetchone()
    if busy:
        logger.info(
            "wal checkpoint incomplete busy=%s log_frames=%s checkpointed=%s",
            busy,
            log_frames,
            checkpointed,
        )


def vacuum(connection: BaseDatabaseWrapper) -> None:
    """Rebuild the database file so pages freed by deletes are returned to the filesystem."""
    with connection.cursor() as cursor:
        cursor.execute("VACUUM")


def database_size(connection: BaseDatabaseWrapper) -> int:
    """Return the bytes the database occupies: its pages plus the ``-wal`` file, if any."""
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA page_count")
        (page_count,) = cursor.fetchone()
        cursor.execute("PRAGMA page_size")
        (page_size,) = cursor.fetchone()
        cursor.execute("PRAGMA database_list")
        files = {name: path for _, name, path in cursor.fetchall()}
    size = int(page_count) * int(page_size)
    path = files.get("main")
    # An in-memory database has no file, so no log beside it either.
    if path and os.path.exists(f"{path}-wal"):
        size += os.path.getsize(f"{path}-wal")
    return size
