"""End to end in headless Chromium: log in, read counts, open a failed job, retry it.

The failed job is made by the real engine: enqueued through Django's tasks API
and run by a real ``later_worker --burst`` subprocess. Set
``LATER_DASHBOARD_SCREENSHOTS=docs/img`` to also save a screenshot of each page.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import Permission, User
from django.utils import timezone

import later_django
from later_django.jobs import get_job
from later_django.models import Schedule

from . import tasks
from .conftest import NAMESPACE

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = os.environ.get("LATER_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "correct horse battery"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium is not at {CHROMIUM}; install Debian's chromium or set LATER_CHROMIUM."
        )
    # Playwright's sync API keeps an event loop on this thread; the ORM calls the
    # tests make between page steps are still ordinary synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield launched
        launched.close()
    os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    yield opened
    context.close()


def user(username: str, *, staff: bool, codenames: tuple[str, ...] = ()) -> User:
    created = User.objects.create_user(username, password=PASSWORD, is_staff=staff)
    created.user_permissions.add(*Permission.objects.filter(codename__in=codenames))
    return created


def log_in(page, live_server, username: str) -> None:
    page.goto(f"{live_server.url}/admin/login/?next=/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("input[type=submit]")
    page.wait_for_load_state()


def tile(page, stage: str) -> str:
    return page.inner_text(f'[data-stage="{stage}"] .later-tile-value')


def test_an_operator_finds_a_failed_job_and_retries_it(page, live_server, run_burst):
    user(
        "operator",
        staff=True,
        codenames=("view_jobindexrow", "change_jobindexrow", "delete_jobindexrow"),
    )
    failing = tasks.explode.enqueue("card <b>declined</b>")
    tasks.echo.enqueue({"ok": True})
    run_burst()

    log_in(page, live_server, "operator")
    page.click('a[href="/admin/later/dashboard/"]')
    assert page.inner_text("h1") == "Later dashboard"
    assert tile(page, "failed") == "1"
    assert tile(page, "success") == "1"
    assert tile(page, "enqueued") == "0"

    page.click('[data-stage="failed"]')
    page.click(f'a[href^="/admin/later/dashboard/job/{failing.id}/"]')
    assert page.inner_text("h1") == f"Job {failing.id}"
    assert "tests.dashboard.tasks.explode" in page.inner_text(".later-facts")
    errors = page.inner_text("#later-errors")
    assert "builtins.ValueError" in errors
    assert "ValueError: card <b>declined</b>" in errors  # shown as text, not markup
    assert page.locator("#later-errors b").count() == 0

    page.click(".later-action-retry")
    assert "Are you sure you want to run this job again?" in page.inner_text("#content")
    page.click('input[type=submit][value="Yes, retry"]')
    assert f"Job {failing.id} retried." in page.inner_text(".messagelist")
    assert "enqueued" in page.inner_text(".later-facts")
    assert get_job(failing.id, namespace=NAMESPACE).stage == "enqueued"

    run_burst()
    page.goto(f"{live_server.url}/admin/later/dashboard/")
    assert tile(page, "failed") == "1"
    assert len(get_job(failing.id, namespace=NAMESPACE).errors) == 2


def test_an_operator_cancels_a_running_job_and_its_task_stops(page, live_server, start_worker):
    from later_django.models import JobIndexRow
    from tests import tasks as worker_tasks
    from tests.conftest import wait_for
    from tests.models import Execution

    user("operator", staff=True, codenames=("view_jobindexrow", "change_jobindexrow"))
    # The task ends once it has seen the cancel and the test has looked at the stopping
    # job: a task that ended at once could end before the page showed it stopping.
    running = worker_tasks.stops_when_cancelled.enqueue("browser-cancel", gate="looked")
    start_worker()
    wait_for(lambda: Execution.objects.filter(kind="browser-cancel:start").exists())

    log_in(page, live_server, "operator")
    page.goto(f"{live_server.url}/admin/later/dashboard/jobs/running/")
    page.click(f'a[href^="/admin/later/dashboard/job/{running.id}/"]')
    assert "running" in page.inner_text(".later-facts")
    page.click(".later-action-cancel")
    assert "a running one is asked to stop" in page.inner_text("#content")
    page.fill("#later-reason", "customer <b>changed</b> the order")
    page.click('input[type=submit][value="Yes, cancel"]')
    assert f"Job {running.id}: cancel requested." in page.inner_text(".messagelist")
    assert "cancel requested" in page.inner_text("#later-stopping")
    assert page.locator(".later-action-cancel").count() == 0
    Execution.objects.create(kind="looked", value="", pid=0, at=0)

    wait_for(lambda: JobIndexRow.objects.get(job_id=running.id).stage == "cancelled")
    assert Execution.objects.filter(kind="browser-cancel:saw-cancel").count() == 1
    page.reload()
    assert "cancelled" in page.inner_text(".later-facts")
    assert page.inner_text("#later-reason") == "customer <b>changed</b> the order"
    assert page.locator("#later-stopping").count() == 0
    assert "cancel requested" in page.inner_text("#content")  # in its history


def test_a_viewer_finds_which_schedule_no_worker_fires(page, live_server):
    later_django.schedule("nightly", "0 3 * * *", tasks.echo, {"report": "sales"})
    later_django.schedule("hourly", "0 * * * *", tasks.echo, {"report": "stock"})
    Schedule.objects.filter(identifier="hourly").update(
        next_run_at=timezone.now() - timedelta(hours=2)
    )
    user("watcher", staff=True, codenames=("view_jobindexrow",))
    log_in(page, live_server, "watcher")
    page.goto(f"{live_server.url}/admin/later/dashboard/")
    page.click(".later-nav >> text=Schedules")

    assert page.inner_text("h1") == "Schedules"
    hourly = page.inner_text("#schedule-hourly")
    assert "overdue" in hourly
    assert "due since 2" in hourly
    assert "is a worker running for this namespace?" in hourly
    assert 'tests.dashboard.tasks.echo({"report": "stock"})' in hourly
    assert "scheduled" in page.inner_text("#schedule-nightly")


def test_an_operator_unblocks_partitions_from_the_triage_desk(page, live_server):
    from later_django.engine.outcomes import RETRY
    from later_django.models import PartitionHead, PartitionLease
    from later_django.topics.registry import forget_layouts
    from tests.topics import tasks as ordered
    from tests.topics.helpers import claim, finish, keys_in_distinct_partitions

    forget_layouts()
    operator = ("view_jobindexrow", "change_jobindexrow")
    user("operator", staff=True, codenames=operator)
    a, b = keys_in_distinct_partitions(2)
    failing = [ordered.step.using(partition_key=a).enqueue(a, n).id for n in range(3)]
    stuck = [ordered.step.using(partition_key=b).enqueue(b, n).id for n in range(2)]
    claimed = {c.job_id: c for c in claim("worker-a")}
    finish("worker-a", claimed[failing[0]], RETRY, retry_in=600)
    past = timezone.now() - timedelta(seconds=30)
    stuck_part = partition_for(stuck[0])
    PartitionLease.objects.filter(partition=stuck_part).update(expires_at=past)
    PartitionHead.objects.filter(partition=stuck_part).update(available_at=past)

    log_in(page, live_server, "operator")
    page.goto(f"{live_server.url}/admin/later/dashboard/topics/")
    page.click("#later-triage-link")
    assert page.inner_text("h1") == "Triage desk"
    failing_row = f"#triage-orders-{partition_for(failing[0])}"
    stuck_row = f"#triage-orders-{stuck_part}"
    assert "the head waits for its retry" in page.inner_text(failing_row)
    assert page.inner_text(f"{failing_row} .later-behind") == "2"
    assert "the lease of worker-a (epoch 1) expired" in page.inner_text(stuck_row)

    # Retry now: the failing head may run at once.
    page.click(f"{failing_row} .later-action-retry")
    assert "Are you sure you want to retry this head now?" in page.inner_text("#content")
    page.click('input[type=submit][value="Yes, retry now"]')
    assert "may run again now" in page.inner_text(".messagelist")
    assert PartitionHead.objects.get(job_id=failing[0]).available_at <= timezone.now()

    # Release the stalled lease: its owner is cleared.
    page.click(f"{stuck_row} .later-action-release")
    page.click('input[type=submit][value="Yes, release"]')
    assert "released from worker-a" in page.inner_text(".messagelist")
    assert PartitionLease.objects.get(partition=stuck_part).owner is None

    # Skip the stalled head with a reason: the partition moves on.
    page.click(f"{stuck_row} .later-action-skip")
    page.fill("#later-reason", "customer <b>left</b>")
    page.click('input[type=submit][value="Yes, skip"]')
    assert "the partition moved on to its next job" in page.inner_text(".messagelist")
    assert PartitionHead.objects.get(partition=stuck_part).job_id == stuck[1]
    skipped = get_job(stuck[0], namespace=NAMESPACE)
    assert (skipped.stage, skipped.cancel_reason) == ("cancelled", "customer <b>left</b>")
    page.goto(f"{live_server.url}/admin/later/dashboard/job/{stuck[0]}/")
    assert "skipped as head of orders" in page.inner_text("#content")
    assert "released by operator" in page.inner_text("#content")
    forget_layouts()


def partition_for(job_id: str) -> int:
    from later_django.models import JobIndexRow

    return JobIndexRow.objects.get(job_id=job_id).partition


def test_an_operator_pauses_runs_and_resumes_a_schedule(page, live_server):
    later_django.schedule("stock-sync", "*/15 * * * *", tasks.echo, {"sync": "stock"})
    user("operator", staff=True, codenames=("view_jobindexrow", "change_jobindexrow"))
    log_in(page, live_server, "operator")
    page.goto(f"{live_server.url}/admin/later/dashboard/schedules/")

    page.click("#schedule-stock-sync .later-action-pause")
    assert "Are you sure you want to pause this schedule?" in page.inner_text("#content")
    page.click('input[type=submit][value="Yes, pause"]')
    assert "Schedule stock-sync paused" in page.inner_text(".messagelist")
    assert "paused" in page.inner_text("#schedule-stock-sync")
    assert Schedule.objects.get().paused

    page.click("#schedule-stock-sync .later-action-run")
    page.click('input[type=submit][value="Yes, run now"]')
    job_id = Schedule.objects.get().last_job_id
    assert f"job {job_id} enqueued" in page.inner_text(".messagelist")
    assert job_id in page.inner_text("#schedule-stock-sync")

    page.click("#schedule-stock-sync .later-action-resume")
    page.click('input[type=submit][value="Yes, resume"]')
    assert "Schedule stock-sync resumed" in page.inner_text(".messagelist")
    assert "scheduled" in page.inner_text("#schedule-stock-sync")
    assert not Schedule.objects.get().paused


def test_the_overview_refreshes_itself_without_reloading(page, live_server, make_job):
    user("watcher", staff=True, codenames=("view_jobindexrow",))
    log_in(page, live_server, "watcher")
    page.goto(f"{live_server.url}/admin/later/dashboard/")
    assert tile(page, "failed") == "0"
    page.evaluate("window.laterMarker = 1")
    make_job("failed")
    page.wait_for_function(
        "document.querySelector('[data-stage=\"failed\"] .later-tile-value').textContent === '1'",
        timeout=15_000,
    )
    assert page.evaluate("window.laterMarker") == 1


def test_people_without_access_see_nothing(page, live_server, make_job):
    make_job("failed", task_path="secret.tasks.payroll")
    dashboard = f"{live_server.url}/admin/later/dashboard/"

    page.goto(dashboard)
    assert "/admin/login/" in page.url
    assert page.locator(".later-tile").count() == 0

    user("customer", staff=False, codenames=("view_jobindexrow",))
    log_in(page, live_server, "customer")
    page.goto(dashboard)
    assert "/admin/login/" in page.url
    assert page.locator(".later-tile").count() == 0
    page.context.clear_cookies()

    user("intern", staff=True)
    log_in(page, live_server, "intern")
    assert page.locator('a[href="/admin/later/dashboard/"]').count() == 0
    response = page.goto(dashboard)
    assert response is not None
    assert response.status == 403
    failed = page.goto(f"{dashboard}jobs/failed/")
    assert failed is not None
    assert failed.status == 403
    assert "secret.tasks.payroll" not in page.content()


@pytest.mark.skipif(
    not os.environ.get("LATER_DASHBOARD_SCREENSHOTS"),
    reason="set LATER_DASHBOARD_SCREENSHOTS=<directory> to save screenshots of each page",
)
def test_screenshots_of_every_page(page, live_server, run_burst):
    from later_django.engine.cancelling import cancel_by_id
    from later_django.engine.claiming import claim

    from . import demo

    target = Path(os.environ["LATER_DASHBOARD_SCREENSHOTS"])
    target.mkdir(parents=True, exist_ok=True)
    user(
        "operator",
        staff=True,
        codenames=("view_jobindexrow", "change_jobindexrow", "delete_jobindexrow"),
    )
    failing = tasks.explode.enqueue("card declined for order 1042")
    for i in range(6):
        tasks.echo.enqueue({"order": 1040 + i})
    run_burst()
    # A long export that someone cancels while it runs: its worker holds the lease.
    export = tasks.echo.enqueue({"export": "orders-2026-q3.csv"})
    claim(NAMESPACE, "web-2:4101:00a3f1", queues=None, free=1, lease_seconds=300, using="default")
    cancel_by_id(export.id, namespace=NAMESPACE, reason="Exported the wrong quarter.")
    demo.fill(NAMESPACE, timezone.now())
    demo.schedules(NAMESPACE, timezone.now())
    log_in(page, live_server, "operator")

    def shoot(path: str, name: str) -> None:
        page.goto(f"{live_server.url}{path}")
        page.screenshot(path=str(target / f"{name}.png"), full_page=True)

    shoot("/admin/", "admin-index")
    shoot("/admin/later/dashboard/", "overview")
    shoot("/admin/later/dashboard/jobs/failed/", "jobs-failed")
    shoot("/admin/later/dashboard/jobs/success/", "jobs-success")
    shoot(f"/admin/later/dashboard/job/{failing.id}/", "job-failed")
    shoot(f"/admin/later/dashboard/job/{failing.id}/retry/", "confirm-retry")
    shoot(f"/admin/later/dashboard/job/{export.id}/", "job-cancel-requested")
    shoot("/admin/later/dashboard/schedules/", "schedules")
    shoot("/admin/later/dashboard/triage/", "triage")
    shoot("/admin/later/dashboard/topics/", "topics")
    shoot("/admin/later/dashboard/topics/orders/", "topic-partitions")
    shoot("/admin/later/dashboard/topics/orders/5/", "partition-jobs")
    shoot("/admin/later/jobindexrow/", "changelist-jobs")
