from datetime import timedelta

import pytest
from django.db.models import QuerySet
from django.utils import timezone

from later_django.storage import Storage


@pytest.fixture
def storage() -> Storage:
    return Storage("test")


def backdate(rows: QuerySet, seconds: float = 60) -> None:
    """Make ``rows`` expired as if their TTL had run out ``seconds`` ago, without sweeping."""
    rows.update(date_expire=timezone.now() - timedelta(seconds=seconds))
