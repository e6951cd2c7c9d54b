"""Schedules: when each runs next, how its last occurrence went, and which ones no worker fires."""

import re
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

import later_django
from later_django.dashboard import schedules as schedule_reads
from later_django.dashboard.present import CALL_LENGTH, call
from later_django.models import Schedule
from later_django.schedules.ticking import run_due
from later_django.tasks_api import default_task_backend
from tests import tasks
from tests.schedules import tasks as schedule_tasks

pytestmark = pytest.mark.django_db

SCHEDULES = reverse("admin:later_dashboard_schedules")


def row_of(html: str, identifier: str) -> str:
    found = re.search(rf'<tr id="schedule-{re.escape(identifier)}">(.*?)</tr>', html, re.S)
    assert found, f"no row for {identifier!r}"
    return found.group(1)


def due_since(identifier: str, ago: timedelta) -> None:
    Schedule.objects.filter(identifier=identifier).update(next_run_at=timezone.now() - ago)


def test_every_page_links_to_the_schedules(viewer_client):
    html = viewer_client.get(reverse("admin:later_dashboard_changelist")).content.decode()
    assert f'href="{SCHEDULES}"' in html


def test_an_empty_namespace_says_how_to_make_a_schedule(viewer_client):
    html = viewer_client.get(SCHEDULES).content.decode()
    assert "No schedule in this namespace" in html
    assert "later_django.schedule()" in html


def test_a_schedule_shows_its_cron_call_and_next_run(viewer_client):
    info = later_django.schedule("nightly", "0 3 * * *", tasks.record, "report", value=1)
    later_django.schedule("by-path", "@hourly", "tests.schedules.tasks.tick", "k")

    html = viewer_client.get(SCHEDULES).content.decode()

    nightly = row_of(html, "nightly")
    assert ">0 3 * * *</code>" in nightly
    assert "<code>tests.tasks.record(&quot;report&quot;, value=1)</code>" in nightly
    assert "queue default, priority 0" in nightly
    assert info.next_run_at.strftime("%Y-%m-%d %H:%M:%S") in nightly
    assert "later-state-scheduled" in nightly
    assert "overlapping" in nightly
    assert "never" in nightly
    assert "queue slow, priority 5" in row_of(html, "by-path")  # the task's own options
    assert html.index('id="schedule-by-path"') < html.index('id="schedule-nightly"')


def test_the_last_occurrence_links_to_its_job_and_back(viewer_client):
    later_django.schedule("minutely", "* * * * *", schedule_tasks.tick, "k")
    due_since("minutely", timedelta(seconds=1))
    [job_id] = run_due(default_task_backend)

    html = viewer_client.get(SCHEDULES).content.decode()
    minutely = row_of(html, "minutely")
    job_url = reverse("admin:later_dashboard_job", args=[job_id])
    assert f'<a href="{job_url}"><code>{job_id}</code></a>' in minutely
    assert "later-stage-enqueued" in minutely
    assert "later-state-scheduled" in minutely  # it moved on to the next minute

    job_page = viewer_client.get(job_url).content.decode()
    assert f'<a href="{SCHEDULES}#schedule-minutely">minutely</a>' in job_page


def test_a_schedule_no_worker_fires_is_flagged_overdue(viewer_client):
    later_django.schedule("late", "*/5 * * * *", tasks.noop)
    later_django.schedule("just-due", "*/5 * * * *", tasks.noop)
    due_since("late", timedelta(minutes=7))
    due_since("just-due", timedelta(seconds=5))

    html = viewer_client.get(SCHEDULES).content.decode()

    late = row_of(html, "late")
    assert "later-state-overdue" in late
    assert "is a worker running for this namespace?" in late
    assert "later-state-due" in row_of(html, "just-due")


def test_a_sequential_schedule_waiting_for_its_last_occurrence_says_so(viewer_client):
    later_django.schedule("report", "* * * * *", tasks.noop, sequential=True)
    due_since("report", timedelta(seconds=1))
    run_due(default_task_backend)  # its occurrence is queued, not finished
    due_since("report", timedelta(minutes=10))

    report = row_of(viewer_client.get(SCHEDULES).content.decode(), "report")

    assert "sequential" in report
    assert "later-state-waiting" in report
    assert "for its last occurrence to finish" in report


def test_the_page_reads_a_bounded_number_of_schedules(viewer_client, monkeypatch):
    monkeypatch.setattr(schedule_reads, "SCHEDULE_LIMIT", 2)
    for name in ("a", "b", "c"):
        later_django.schedule(name, "@daily", tasks.noop)

    html = viewer_client.get(SCHEDULES).content.decode()

    assert 'id="schedule-a"' in html
    assert 'id="schedule-b"' in html
    assert 'id="schedule-c"' not in html
    assert "More schedules exist; only the first 2 by identifier are shown." in html


def test_long_arguments_are_cut_short():
    text = call(["x" * 500], {"n": 1})
    assert len(text) == CALL_LENGTH
    assert text.endswith("…")
