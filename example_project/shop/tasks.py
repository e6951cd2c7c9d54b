"""The example shop's background work."""

import random
import time

from django.utils import timezone

from later_django import task

from .models import Order


@task(queue_name="emails", max_attempts=3, backoff={"policy": "fixed", "seconds": 5})
def send_confirmation(order_id: int) -> str:
    order = Order.objects.get(pk=order_id)
    time.sleep(0.2)  # pretend to talk to a mail server
    Order.objects.filter(pk=order_id, confirmed_at__isnull=True).update(confirmed_at=timezone.now())
    return f"confirmation sent to {order.email}"


@task(max_attempts=4, backoff="exponential")
def sync_inventory(sku: str) -> int:
    if random.random() < 0.5:
        raise ConnectionError(f"warehouse API timed out for {sku}")
    return random.randint(0, 100)


@task
def nightly_report() -> dict:
    return {"orders": Order.objects.count()}
