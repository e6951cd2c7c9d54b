"""Fixtures of the dashboard tests: users with and without permissions, and index rows."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from django.utils import timezone

from later_django.models import DeliveryCommand, JobIndexRow, StorageValue
from later_django.records import JobRecord, job_key, to_micros
from tests.db_state import count_new_rows

NAMESPACE = "tests"
_ids = itertools.count(1)


def new_user(username: str, *, staff: bool = True, perms: tuple[str, ...] = ()) -> User:
    user = User.objects.create_user(username, password="pw", is_staff=staff)
    for codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


@pytest.fixture
def viewer() -> User:
    return new_user("viewer", perms=("view_jobindexrow",))


@pytest.fixture
def operator() -> User:
    return new_user(
        "operator", perms=("view_jobindexrow", "change_jobindexrow", "delete_jobindexrow")
    )


@pytest.fixture
def viewer_client(viewer: User) -> Client:
    client = Client()
    client.force_login(viewer)
    return client


@pytest.fixture
def operator_client(operator: User) -> Client:
    client = Client()
    client.force_login(operator)
    return client


def job_id(n: int | None = None) -> str:
    """A 26-character lower-case id that sorts by ``n``."""
    return f"01jtest{next(_ids) if n is None else n:019d}"


@pytest.fixture
def make_job() -> Callable[..., JobIndexRow]:
    """Insert one job's index row, counted in its stage (and a queued job's delivery command)."""

    def make(stage: str = "enqueued", *, at: datetime | None = None, **fields: Any) -> JobIndexRow:
        now = at or timezone.now()
        values: dict[str, Any] = {
            "namespace": NAMESPACE,
            "job_id": job_id(),
            "task_path": "tests.dashboard.tasks.echo",
            "queue_name": "default",
            "stage": stage,
            "enqueued_at": now - timedelta(seconds=5),
            "transitioned_at": now,
        }
        values.update(fields)
        row = JobIndexRow.objects.create(**values)
        count_new_rows(row)
        if row.stage == "enqueued" and row.topic is None:  # queued: its delivery command
            DeliveryCommand.objects.create(
                namespace=row.namespace,
                queue_name=row.queue_name,
                job_id=row.job_id,
                priority=row.priority,
                available_at=row.transitioned_at,
                enqueued_at=row.enqueued_at,
            )
        return row

    return make


def store_record(row: JobIndexRow, **fields: Any) -> JobRecord:
    """Write the stored record of an index row, with any record fields overridden."""
    values: dict[str, Any] = {
        "id": row.job_id,
        "task_path": row.task_path,
        "args": [],
        "kwargs": {},
        "queue_name": row.queue_name,
        "priority": row.priority,
        "backend": "default",
        "enqueued_at": to_micros(row.enqueued_at) or 0,
        "stage": row.stage,
        "topic": row.topic,
        "partition": row.partition,
        "sequence": row.sequence,
        "parent_id": row.parent_job_id,
    }
    values.update(fields)
    stored = JobRecord(**values)
    StorageValue.objects.update_or_create(
        namespace=row.namespace, key=job_key(row.job_id), defaults={"value": stored.encode()}
    )
    return stored
