"""Renewing a worker's leases and its heartbeat row."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from django.utils import timezone

from ..db import connection_for, to_db, write_transaction
from ..sql import dialect


def renew(namespace: str, owner: str, *, lease_seconds: float, using: str) -> None:
    """Push the expiry of every execution lease and queue command ``owner`` holds.

    On PostgreSQL a row locked at this moment is skipped rather than waited
    for: it belongs to a job whose outcome is being stored (or that another
    worker is taking over), and waiting for it could deadlock with the outcome
    statement, which locks the same rows in another order. A skipped lease is
    renewed at the next heartbeat, well within its term.
    """
    connection = connection_for(using)
    expires = to_db(connection, timezone.now() + timedelta(seconds=lease_seconds))
    skip_locked = dialect(connection).SKIP_LOCKED
    with write_transaction(using) as cursor:
        cursor.execute(
            "UPDATE later_delivery_queue SET available_at = %s WHERE id IN ("
            "SELECT id FROM later_delivery_queue WHERE namespace = %s AND lease_owner = %s"
            f"{skip_locked})",
            [expires, namespace, owner],
        )
        cursor.execute(
            "UPDATE later_job_execution SET lease_expires_at = %s WHERE id IN ("
            f"SELECT id FROM later_job_execution WHERE namespace = %s AND owner = %s{skip_locked})",
            [expires, namespace, owner],
        )


def heartbeat(
    namespace: str, owner: str, *, queues: list[str], concurrency: int, started, using: str
) -> None:
    """Upsert this worker's row in ``later_worker``."""
    connection = connection_for(using)
    now = to_db(connection, timezone.now())
    with write_transaction(using) as cursor:
        cursor.execute(
            "INSERT INTO later_worker (namespace, worker_id, hostname, pid, queues, concurrency, "
            "started_at, heartbeat_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (namespace, worker_id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at",
            [
                namespace,
                owner,
                socket.gethostname()[:255],
                os.getpid(),
                _json(queues),
                concurrency,
                to_db(connection, started),
                now,
            ],
        )


def retire(namespace: str, owner: str, *, using: str) -> None:
    """Remove this worker's heartbeat row when it stops cleanly."""
    with write_transaction(using) as cursor:
        cursor.execute(
            "DELETE FROM later_worker WHERE namespace = %s AND worker_id = %s", [namespace, owner]
        )


def _json(value: object) -> str:
    import json

    return json.dumps(value)
