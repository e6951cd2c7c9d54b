"""Fixtures of the worker tests that run the soak's scenarios (bench/soak.py)."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import quote

import pytest
from django.db import connection

from bench.common import database_urls, drop


def admin_url() -> str:
    """The suite's PostgreSQL server, through its maintenance database."""
    settings = connection.settings_dict
    user = quote(settings["USER"] or "postgres")
    password = f":{quote(settings['PASSWORD'])}" if settings["PASSWORD"] else ""
    host, port = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
    return f"postgresql://{user}{password}@{host}:{port}/postgres"


@pytest.fixture
def soak_url() -> Iterator[str]:
    """A throwaway database of the suite's kind for the soak, dropped afterwards."""
    kind = "sqlite" if connection.vendor == "sqlite" else "postgres"
    admin = admin_url() if kind == "postgres" else ""
    [(kind, url, handle)] = database_urls(kind, admin)
    try:
        yield url
    finally:
        drop(kind, handle, admin)
