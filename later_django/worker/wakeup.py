"""Waking an idle worker as soon as new work commits.

PostgreSQL: a thread LISTENs on the ``later_delivery`` channel (see migration
0003) over its own connection and sets the worker's wake event; on
``later_cancel`` (a running job's cancel was requested) it calls
``on_cancel``, so the worker looks for cancels at once. When NOTIFY
can't arrive (behind a transaction-pooling proxy, or a lost connection) the
worker still polls. SQLite: the idle loop watches ``PRAGMA data_version``,
which changes whenever another connection commits to the file.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import connections

from ..db import CANCEL_CHANNEL, NOTIFY_CHANNEL

logger = logging.getLogger(__name__)


class PostgresListener(threading.Thread):
    def __init__(
        self,
        using: str,
        namespace: str,
        wake: threading.Event,
        on_cancel: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(name="later-listen", daemon=True)
        self.using = using
        self.namespace = namespace
        self.wake = wake
        self.on_cancel = on_cancel
        self.stopping = threading.Event()

    def stop(self) -> None:
        self.stopping.set()

    def run(self) -> None:
        import psycopg

        wrapper = connections[self.using]
        params = wrapper.get_connection_params()
        params.pop("cursor_factory", None)
        params.pop("context", None)
        params.pop("server_side_binding", None)
        pause = 0.1
        while not self.stopping.is_set():
            try:
                with psycopg.connect(**params, autocommit=True) as conn:
                    conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    conn.execute(f"LISTEN {CANCEL_CHANNEL}")
                    pause = 0.1
                    self.wake.set()  # catch up on anything committed while not listening
                    while not self.stopping.is_set():
                        for note in conn.notifies(timeout=0.5):
                            if note.payload != self.namespace:
                                continue
                            if note.channel == CANCEL_CHANNEL:
                                if self.on_cancel is not None:
                                    self.on_cancel()
                            else:
                                self.wake.set()
            except psycopg.Error as e:
                logger.warning("LISTEN connection lost error=%s; polling until it is back", e)
                self.stopping.wait(pause)
                pause = min(pause * 2, 5.0)


class SqliteWatcher:
    """Tells whether another connection committed since the last look."""

    def __init__(self, using: str) -> None:
        self.using = using
        self.version: int | None = None

    def changed(self) -> bool:
        with connections[self.using].cursor() as cursor:
            cursor.execute("PRAGMA data_version")
            version = cursor.fetchone()[0]
        changed = self.version is not None and version != self.version
        self.version = version
        return changed


def idle_wait(
    wake: threading.Event, timeout: float, watcher: SqliteWatcher | None, step: float = 0.005
) -> None:
    """Sleep until woken, until ``timeout`` passes or (SQLite) until another commit lands."""
    if watcher is None:
        wake.wait(timeout)
        return
    deadline = time.monotonic() + timeout
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0 or wake.wait(min(step, remaining)):
            return
        if watcher.changed():
            return


def use_wal(using: str) -> None:
    """Put a SQLite database in WAL mode, so readers and the one writer don't block each other.

    The mode is stored in the database file, so every later connection has it too.
    """
    with connections[using].cursor() as cursor:
        cursor.execute("PRAGMA journal_mode=WAL")
        mode = cursor.fetchone()[0]
    if mode.lower() != "wal":
        logger.warning("SQLite database stays in journal_mode=%s; WAL was refused", mode)
