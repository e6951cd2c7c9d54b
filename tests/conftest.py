import pytest
from django.db import connection


@pytest.fixture
def vendor() -> str:
    return connection.vendor
