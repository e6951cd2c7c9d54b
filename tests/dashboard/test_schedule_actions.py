"""Pause, resume and run now on the schedules page: confirmed POSTs with CSRF."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import later_django
from later_django.models import Schedule
from later_django.schedules import control
from later_django.schedules.ticking import run_due
from later_django.tasks_api import default_task_backend
from tests import tasks
from tests.schedules import tasks as schedule_tasks

from .test_schedules import SCHEDULES, row_of

pytestmark = pytest.mark.django_db


def url(identifier: str, action: str) -> str:
    return reverse("admin:later_dashboard_schedule_action", args=[action, identifier])


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def minutely():
    later_django.schedule("minutely", "* * * * *", schedule_tasks.tick, "k")
    return Schedule.objects.get(identifier="minutely")


def test_an_operator_sees_pause_and_run_now_a_viewer_sees_neither(
    operator_client, viewer_client, minutely
):
    row = row_of(operator_client.get(SCHEDULES).content.decode(), "minutely")
    assert f'href="{url("minutely", "pause")}"' in row
    assert f'href="{url("minutely", "run")}">Run now</a>' in row
    assert "later-action-" not in row_of(viewer_client.get(SCHEDULES).content.decode(), "minutely")


def test_the_confirmation_page_changes_nothing(operator_client, minutely):
    response = operator_client.get(url("minutely", "pause"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Are you sure you want to pause this schedule?" in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert Schedule.objects.get().paused is False


def test_pause_stops_the_schedule_and_the_page_says_so(operator_client, minutely):
    response = operator_client.post(url("minutely", "pause"))
    assert response.status_code == 302
    assert response.url == f"{SCHEDULES}#schedule-minutely"
    assert messages_of(response) == [
        "Schedule minutely paused; it does not fire until it is resumed."
    ]
    assert Schedule.objects.get().paused is True
    Schedule.objects.update(next_run_at=timezone.now() - timedelta(hours=1))
    assert run_due(default_task_backend) == []
    row = row_of(operator_client.get(SCHEDULES).content.decode(), "minutely")
    assert "later-state-paused" in row
    assert "does not fire until it is resumed" in row
    assert f'href="{url("minutely", "resume")}"' in row


def test_resume_fires_from_now_on(operator_client, minutely):
    control.pause("tests", "minutely", using="default")
    Schedule.objects.update(next_run_at=timezone.now() - timedelta(hours=1))
    response = operator_client.post(url("minutely", "resume"))
    [message] = messages_of(response)
    assert message.startswith("Schedule minutely resumed; it next runs at ")
    row = Schedule.objects.get()
    assert row.paused is False
    assert row.next_run_at > timezone.now()
    assert run_due(default_task_backend) == []


def test_run_now_enqueues_an_occurrence_and_links_it(operator_client, minutely):
    response = operator_client.post(url("minutely", "run"))
    job_id = Schedule.objects.get().last_job_id
    assert job_id is not None
    assert messages_of(response) == [f"Schedule minutely ran now: job {job_id} enqueued."]
    row = row_of(operator_client.get(SCHEDULES).content.decode(), "minutely")
    assert reverse("admin:later_dashboard_job", args=[job_id]) in row


def test_run_now_of_a_busy_sequential_schedule_is_refused_with_a_message(operator_client):
    later_django.schedule("report", "0 3 * * *", tasks.noop, sequential=True)
    operator_client.post(url("report", "run"))
    first = Schedule.objects.get().last_job_id
    response = operator_client.post(url("report", "run"))
    message = messages_of(response)[-1]  # after the first run's success
    assert message.startswith("Schedule 'report' is sequential and its last occurrence")
    assert Schedule.objects.get().last_job_id == first


@pytest.mark.parametrize("action", ["pause", "resume", "run"])
def test_a_viewer_may_not_act(viewer_client, minutely, action):
    assert viewer_client.get(url("minutely", action)).status_code == 403
    assert viewer_client.post(url("minutely", action)).status_code == 403
    row = Schedule.objects.get()
    assert (row.paused, row.last_job_id) == (False, None)


def test_actions_refuse_a_post_without_the_csrf_token(operator, minutely):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    for action in ("pause", "run"):
        assert client.post(url("minutely", action)).status_code == 403
    row = Schedule.objects.get()
    assert (row.paused, row.last_job_id) == (False, None)


def test_an_unknown_schedule_or_action_is_not_found(operator_client, minutely):
    assert operator_client.get(url("nope", "pause")).status_code == 404
    assert operator_client.get(url("minutely", "explode")).status_code == 404
