"""Run the example project: migrate, seed some work, start a worker and the dev server.

./dev demo            # http://127.0.0.1:8000/admin/  (user admin, password admin)
./dev demo --port 8001
"""

import argparse
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description="Run the later_django example project.")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--no-seed", action="store_true", help="do not enqueue sample jobs")
    options = parser.parse_args()

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    user_model = get_user_model()
    if not user_model.objects.filter(username="admin").exists():
        user_model.objects.create_superuser("admin", "admin@example.com", "admin")
        print("created superuser admin / admin")
    if not options.no_seed:
        seed()

    manage = [sys.executable, str(ROOT / "manage.py")]
    worker = subprocess.Popen([*manage, "later_worker", "--concurrency", "4"], cwd=ROOT)
    print(
        f"\nworker pid {worker.pid}; dashboard at http://127.0.0.1:{options.port}/admin/later/dashboard/"
        " (admin / admin). Ctrl-C stops both.\n"
    )
    try:
        subprocess.run(
            [*manage, "runserver", f"127.0.0.1:{options.port}", "--noreload"], cwd=ROOT, check=False
        )
    except KeyboardInterrupt:
        pass
    finally:
        if worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(timeout=35)
            except subprocess.TimeoutExpired:
                worker.kill()


def seed() -> None:
    """Create a few orders and enqueue their work in the same transactions."""
    from datetime import timedelta

    from django.db import transaction

    from example_project.shop.models import Order
    from example_project.shop.tasks import nightly_report, send_confirmation, sync_inventory

    start = Order.objects.count()
    for n in range(start, start + 5):
        with transaction.atomic():
            order = Order.objects.create(reference=f"ORD-{n:05d}", email=f"buyer{n}@example.com")
            send_confirmation.enqueue(order.pk)
    for sku in ("apple", "pear", "plum"):
        sync_inventory.enqueue(sku)
    nightly_report.using(run_after=timedelta(seconds=30)).enqueue()
    print("seeded 5 orders with their confirmation jobs, 3 inventory syncs and a delayed report")


if __name__ == "__main__":
    main()
