"""PostgreSQL: the engine's hot statements are prepared; the project's own queries are not."""

import pytest
from django.db import connection, transaction
from django.test import override_settings

from later_django.engine.claiming import claim
from tests import tasks
from tests.models import Order

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def postgres_only():
    if connection.vendor != "postgresql":
        pytest.skip("PostgreSQL only")
    connection.close()  # a fresh session: nothing prepared yet
    yield
    connection.close()


def prepared() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [row[0] for row in cursor.fetchall()]


def test_enqueue_and_claim_are_prepared_once_per_connection():
    for n in range(3):
        with transaction.atomic():
            Order.objects.create(reference=f"order-{n}")
            tasks.add.enqueue(n, b=1)
    claimed = claim("tests", "w1", queues=None, free=16, lease_seconds=30, using="default")

    statements = prepared()
    assert len(claimed) == 1  # fewer than 16 ready: one at a time
    assert sum("INSERT INTO later_storage" in s for s in statements) == 1
    assert sum("later_job_execution" in s for s in statements) == 1
    # The project's own queries still go through Django's client-side binding.
    assert not any("tests_order" in s for s in statements)


def test_nothing_is_prepared_when_the_setting_is_off():
    with override_settings(LATER_PREPARED_STATEMENTS=False):
        with transaction.atomic():
            tasks.add.enqueue(1, b=2)
        assert claim("tests", "w1", queues=None, free=16, lease_seconds=30, using="default")

    assert prepared() == []


def test_a_prepared_enqueue_rolls_back_with_the_callers_transaction():
    with transaction.atomic():
        tasks.add.enqueue(1, b=2)

    def change_of_mind():
        with transaction.atomic():
            Order.objects.create(reference="order-7")
            tasks.add.enqueue(3, b=4)
            raise RuntimeError("the caller changes its mind")

    with pytest.raises(RuntimeError):
        change_of_mind()

    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM later_jobs_index")
        assert cursor.fetchone()[0] == 1
    assert not Order.objects.exists()
