"""Renewing a worker's leases and its heartbeat row."""

from __future__ import annotations

import os
import socket
from datetime import timedelta

from django.utils import timezone

from ..db import connection_for, to_db, write_transaction


def renew(namespace: str, owner: str, *, lease_seconds: float, using: str) -> None:
    """Push the expiry of every execution lease and queue command ``owner`` holds.

    Queue commands first, then execution leases: the order a claim locks them in.
    """
    connection = connection_for(using)
    expires = to_db(connection, timezone.now() + timedelta(seconds=lease_seconds))
    with write_transaction(using) as cursor:
        cursor.execute(
            "UPDATE later_delivery_queue SET available_at = %s "
            "WHERE namespace = %s AND lease_owner = %s",
            [expires, namespace, owner],
        )
        cursor.execute(
            "UPDATE later_job_execution SET lease_expires_at = %s "
            "WHERE namespace = %s AND owner = %s",
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
