"""Topic tests use the suite's declared topics (tests/settings.py: orders=8, events=4)."""

from __future__ import annotations

import pytest

from later_django.topics.registry import forget_layouts

ORDERS = 8


@pytest.fixture(autouse=True)
def fresh_layout_checks():
    forget_layouts()  # each test's database starts with its own later_topic rows
    yield
    forget_layouts()
