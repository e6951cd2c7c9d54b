"""Jobs by stage: newest transition first, keyset cursors, task and queue filters."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from later_django.dashboard import listing
from later_django.models import DeliveryCommand

pytestmark = pytest.mark.django_db

FAILED = reverse("admin:later_dashboard_jobs", args=["failed"])


def listed(response) -> list[str]:
    return [item.row.job_id for item in response.context["rows"]]


def test_jobs_are_listed_newest_transition_first(viewer_client, make_job):
    now = timezone.now()
    old = make_job("failed", at=now - timedelta(minutes=5))
    new = make_job("failed", at=now)
    make_job("success", at=now)
    assert listed(viewer_client.get(FAILED)) == [new.job_id, old.job_id]


def test_cursor_pages_walk_the_whole_stage_once_even_with_equal_times(
    viewer_client, make_job, monkeypatch
):
    monkeypatch.setattr(listing, "PAGE_SIZE", 4)
    now = timezone.now()
    rows = [make_job("failed", at=now - timedelta(seconds=i // 3)) for i in range(10)]
    seen, url = [], FAILED
    while url:
        response = viewer_client.get(url)
        seen += listed(response)
        url = response.context["next_url"]
    expected = sorted(rows, key=lambda r: (r.transitioned_at, r.pk), reverse=True)
    assert seen == [r.job_id for r in expected]


@override_settings(USE_TZ=False, TIME_ZONE="Asia/Kathmandu")
def test_cursor_pages_walk_the_whole_stage_with_use_tz_off(viewer_client, make_job, monkeypatch):
    monkeypatch.setattr(listing, "PAGE_SIZE", 2)
    now = timezone.now()
    rows = [make_job("failed", at=now - timedelta(seconds=i)) for i in range(5)]
    seen, url = [], FAILED
    while url:
        response = viewer_client.get(url)
        assert response.status_code == 200
        seen += listed(response)
        url = response.context["next_url"]
    assert seen == [r.job_id for r in rows]


def test_pages_never_count_or_offset_the_job_index(viewer_client, make_job):
    now = timezone.now()
    for i in range(60):
        make_job("failed", at=now - timedelta(seconds=i))
    first = viewer_client.get(FAILED)
    with CaptureQueriesContext(connection) as queries:
        viewer_client.get(first.context["next_url"])
    on_index = [q["sql"] for q in queries.captured_queries if "later_jobs_index" in q["sql"]]
    assert on_index
    for sql in on_index:
        assert "OFFSET" not in sql.upper()
        assert "COUNT(" not in sql.upper()


def test_the_task_filter_keeps_only_that_task(viewer_client, make_job):
    wanted = make_job("failed", task_path="shop.tasks.charge")
    make_job("failed", task_path="shop.tasks.refund")
    response = viewer_client.get(FAILED, {"task": "shop.tasks.charge"})
    assert listed(response) == [wanted.job_id]


def test_the_queue_filter_keeps_only_that_queue(viewer_client, make_job):
    wanted = make_job("failed", queue_name="emails")
    make_job("failed", queue_name="default")
    response = viewer_client.get(FAILED, {"queue": "emails"})
    assert listed(response) == [wanted.job_id]
    assert response.context["next_url"] is None


def test_the_queue_filter_looks_through_a_bounded_window_and_offers_to_continue(
    viewer_client, make_job, monkeypatch
):
    monkeypatch.setattr(listing, "QUEUE_SCAN_LIMIT", 5)
    now = timezone.now()
    for i in range(8):
        make_job("failed", at=now - timedelta(seconds=i), queue_name="default")
    rare = make_job("failed", at=now - timedelta(seconds=20), queue_name="emails")
    first = viewer_client.get(FAILED, {"queue": "emails"})
    assert listed(first) == []
    assert first.context["scanned"] == 5
    assert "looks through at most 5 jobs" in first.content.decode()
    second = viewer_client.get(first.context["next_url"])
    assert listed(second) == [rare.job_id]
    assert second.context["next_url"] is None


def test_stage_tabs_show_every_stage_with_its_count(viewer_client, make_job):
    make_job("failed")
    make_job("requeued")
    tabs = viewer_client.get(FAILED).context["tabs"]
    assert [t[0] for t in tabs] == [
        "delayed",
        "waiting",
        "enqueued",
        "running",
        "requeued",
        "success",
        "failed",
        "cancelled",
    ]
    assert {t[0]: t[1] for t in tabs}["requeued"] == 1


def test_expired_jobs_are_not_listed(viewer_client, make_job):
    make_job("success", date_expire=timezone.now() - timedelta(seconds=1))
    live = make_job("success", date_expire=timezone.now() + timedelta(days=1))
    url = reverse("admin:later_dashboard_jobs", args=["success"])
    assert listed(viewer_client.get(url)) == [live.job_id]


def test_an_unknown_stage_is_not_found(viewer_client):
    response = viewer_client.get(reverse("admin:later_dashboard_jobs", args=["exploded"]))
    assert response.status_code == 404


def test_a_forged_cursor_is_a_bad_request(viewer_client):
    response = viewer_client.get(FAILED, {"after": "1;DROP TABLE"})
    assert response.status_code == 400
    assert b"&#x27;&lt;microseconds&gt;.&lt;row id&gt;&#x27;" in response.content


def test_cursor_text_round_trips_to_the_microsecond():
    moment = timezone.now().replace(microsecond=123456)
    cursor = listing.Cursor(moment, 42)
    assert listing.Cursor.parse(str(cursor)) == cursor


def test_task_names_are_escaped_in_the_listing(viewer_client, make_job):
    make_job("failed", task_path="<script>alert(1)</script>")
    html = viewer_client.get(FAILED).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_operators_get_checkboxes_and_the_stage_s_actions(operator_client, viewer_client, make_job):
    make_job("failed")
    response = operator_client.get(FAILED)
    assert response.context["actions"] == ["retry", "delete"]
    assert re.search(r'<input type="checkbox" name="job_id"', response.content.decode())
    assert viewer_client.get(FAILED).context["actions"] == []
    running = operator_client.get(reverse("admin:later_dashboard_jobs", args=["running"]))
    assert running.context["actions"] == ["cancel"]  # a running job is asked to stop


def test_a_full_page_links_to_the_next_one(viewer_client, make_job, monkeypatch):
    monkeypatch.setattr(listing, "PAGE_SIZE", 2)
    for _ in range(3):
        make_job("failed")
    response = viewer_client.get(FAILED)
    assert len(listed(response)) == 2
    assert response.context["next_url"]


ENQUEUED = reverse("admin:later_dashboard_jobs", args=["enqueued"])


def walk(client, url, params=None) -> list[str]:
    """Every job id the pages list, following the next links to the end."""
    seen: list[str] = []
    response = client.get(url, params or {})
    while True:
        assert response.status_code == 200
        seen += listed(response)
        if not response.context["next_url"]:
            return seen
        response = client.get(response.context["next_url"])


def test_queued_jobs_are_listed_newest_command_first_then_the_queued_jobs_of_topics(
    viewer_client, make_job, monkeypatch
):
    monkeypatch.setattr(listing, "PAGE_SIZE", 3)
    now = timezone.now()
    # Commands are listed in the order they were written, whatever their times say.
    plain = [make_job("enqueued", at=now - timedelta(seconds=i % 2)) for i in range(7)]
    ordered = [
        make_job("enqueued", at=now - timedelta(minutes=i), topic="orders", partition=0, sequence=i)
        for i in range(4)
    ]
    running = make_job("running")  # its command is held by the worker running it
    DeliveryCommand.objects.create(
        namespace=running.namespace,
        queue_name="default",
        job_id=running.job_id,
        available_at=now,
        enqueued_at=now,
        lease_owner="host:1:abcdef",
    )
    make_job("delayed")

    seen = walk(viewer_client, ENQUEUED)

    assert seen == [r.job_id for r in reversed(plain)] + [r.job_id for r in ordered]


def test_the_enqueued_page_filters_by_task_and_queue_within_a_bounded_window(
    viewer_client, make_job, monkeypatch
):
    monkeypatch.setattr(listing, "PAGE_SIZE", 2)
    monkeypatch.setattr(listing, "QUEUE_SCAN_LIMIT", 4)
    charge = [make_job(task_path="shop.tasks.charge", queue_name="emails") for _ in range(3)]
    for _ in range(6):
        make_job(task_path="shop.tasks.refund")
    late = make_job(task_path="shop.tasks.charge", queue_name="emails")
    topic = make_job(
        task_path="shop.tasks.charge", queue_name="emails", topic="orders", partition=0, sequence=1
    )
    expected = [late.job_id] + [r.job_id for r in reversed(charge)] + [topic.job_id]

    assert walk(viewer_client, ENQUEUED, {"task": "shop.tasks.charge"}) == expected
    assert walk(viewer_client, ENQUEUED, {"queue": "emails"}) == expected
    first = viewer_client.get(ENQUEUED, {"task": "shop.tasks.charge"})
    assert listed(first) == [late.job_id]  # the first window of four held one
    assert first.context["scanned"] == 4


def test_a_cursor_of_the_enqueued_page_is_a_bad_request_on_another_stage(viewer_client):
    response = viewer_client.get(FAILED, {"after": "q12"})
    assert response.status_code == 400
    assert b"belongs to the enqueued jobs&#x27; page" in response.content
    assert viewer_client.get(ENQUEUED, {"after": "q12"}).status_code == 200
    assert viewer_client.get(ENQUEUED, {"after": "q1x"}).status_code == 400


@override_settings(USE_TZ=False, TIME_ZONE="Asia/Kathmandu")
def test_the_enqueued_page_walks_into_the_topics_jobs_with_use_tz_off(
    viewer_client, make_job, monkeypatch
):
    monkeypatch.setattr(listing, "PAGE_SIZE", 2)
    plain = [make_job() for _ in range(2)]  # exactly one page of commands
    ordered = make_job(topic="orders", partition=0, sequence=1)
    seen = walk(viewer_client, ENQUEUED)
    assert seen == [r.job_id for r in reversed(plain)] + [ordered.job_id]
