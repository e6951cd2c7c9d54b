"""Retry, cancel and delete: confirmed POSTs with CSRF that go through the engine."""

from datetime import timedelta

import pytest
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from later_django.jobs import get_job
from later_django.models import DeliveryCommand, JobExecution, JobIndexRow

from .conftest import NAMESPACE, store_record

pytestmark = pytest.mark.django_db


def action_url(job_id, action):
    return reverse("admin:later_dashboard_action", args=[job_id, action])


def stage_of(job_id):
    return (
        JobIndexRow.objects.filter(namespace=NAMESPACE, job_id=job_id)
        .values_list("stage", flat=True)
        .first()
    )


def messages_of(response):
    return [str(m) for m in get_messages(response.wsgi_request)]


@pytest.fixture
def failed(make_job):
    row = make_job("failed", attempts=1)
    store_record(row, stage="failed")
    return row


def test_the_confirmation_page_changes_nothing(operator_client, failed):
    response = operator_client.get(action_url(failed.job_id, "retry"))
    html = response.content.decode()
    assert response.status_code == 200
    assert "Are you sure you want to run this job again?" in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert stage_of(failed.job_id) == "failed"


def test_retry_puts_a_failed_job_back_in_the_queue(operator_client, failed):
    response = operator_client.post(action_url(failed.job_id, "retry"))
    assert response.status_code == 302
    assert response["Location"] == reverse("admin:later_dashboard_job", args=[failed.job_id])
    assert stage_of(failed.job_id) == "enqueued"
    assert DeliveryCommand.objects.filter(namespace=NAMESPACE, job_id=failed.job_id).exists()
    assert messages_of(response) == [f"Job {failed.job_id} retried."]


def test_an_engine_refusal_is_shown_and_changes_nothing(operator_client, make_job):
    done = make_job("success")
    store_record(done, stage="success")
    response = operator_client.post(action_url(done.job_id, "retry"))
    assert stage_of(done.job_id) == "success"
    assert messages_of(response) == [
        f"Job {done.job_id!r} is success; only failed, cancelled jobs can be retried."
    ]


def test_cancel_keeps_the_reason_given(operator_client, make_job):
    pending = make_job("delayed")
    store_record(pending, stage="delayed")
    operator_client.post(action_url(pending.job_id, "cancel"), {"reason": "duplicate order"})
    assert stage_of(pending.job_id) == "cancelled"
    assert get_job(pending.job_id, namespace=NAMESPACE).cancel_reason == "duplicate order"


def test_cancel_without_a_reason_names_the_user(operator_client, make_job):
    pending = make_job("enqueued")
    store_record(pending, stage="enqueued")
    operator_client.post(action_url(pending.job_id, "cancel"))
    reason = get_job(pending.job_id, namespace=NAMESPACE).cancel_reason
    assert reason == "Cancelled from the admin by operator."


def test_delete_removes_a_finished_job_and_returns_to_its_stage(operator_client, failed):
    response = operator_client.post(action_url(failed.job_id, "delete"))
    assert stage_of(failed.job_id) is None
    assert response["Location"] == reverse("admin:later_dashboard_jobs", args=["failed"])


def test_actions_refuse_a_post_without_the_csrf_token(operator, failed):
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator)
    response = client.post(action_url(failed.job_id, "retry"))
    assert response.status_code == 403
    assert stage_of(failed.job_id) == "failed"


def test_bulk_asks_for_confirmation_then_acts_on_each_job(operator_client, make_job):
    rows = [make_job("failed") for _ in range(3)]
    for row in rows:
        store_record(row, stage="failed")
    url = reverse("admin:later_dashboard_bulk", args=["failed"])
    ids = [r.job_id for r in rows[:2]]
    confirm = operator_client.post(url, {"action": "retry", "job_id": ids})
    html = confirm.content.decode()
    assert confirm.status_code == 200
    assert all(i in html for i in ids)
    assert rows[2].job_id not in html
    assert [stage_of(i) for i in ids] == ["failed", "failed"]
    done = operator_client.post(url, {"action": "retry", "job_id": ids, "confirmed": "yes"})
    assert [stage_of(i) for i in ids] == ["enqueued", "enqueued"]
    assert stage_of(rows[2].job_id) == "failed"
    assert messages_of(done) == ["2 jobs retried."]


def test_bulk_reports_each_job_the_engine_refused(operator_client, make_job):
    ok, moved = make_job("failed"), make_job("failed")
    store_record(ok, stage="failed")
    store_record(moved, stage="failed")
    JobIndexRow.objects.filter(job_id=moved.job_id).update(stage="running")
    url = reverse("admin:later_dashboard_bulk", args=["failed"])
    response = operator_client.post(
        url, {"action": "delete", "job_id": [moved.job_id, ok.job_id], "confirmed": "yes"}
    )
    assert stage_of(ok.job_id) is None
    assert stage_of(moved.job_id) == "running"
    assert messages_of(response) == [
        "1 job deleted.",
        f"Job {moved.job_id!r} is running; only success, failed, cancelled jobs can be deleted.",
    ]


def test_bulk_needs_a_post_with_ticked_jobs(operator_client):
    url = reverse("admin:later_dashboard_bulk", args=["failed"])
    assert operator_client.get(url).status_code == 405
    response = operator_client.post(url, {"action": "retry"})
    assert response.status_code == 302
    assert messages_of(response) == ["Tick at least one job first."]


def test_bulk_never_redirects_off_the_dashboard(operator_client, failed):
    url = reverse("admin:later_dashboard_bulk", args=["failed"])
    response = operator_client.post(
        url,
        {
            "action": "retry",
            "job_id": [failed.job_id],
            "confirmed": "yes",
            "back": "https://evil.example/",
        },
    )
    assert response["Location"] == reverse("admin:later_dashboard_jobs", args=["failed"])


@pytest.fixture
def running(make_job):
    """A running job whose worker's lease is live."""
    row = make_job("running", attempts=1)
    store_record(row, stage="running")
    JobExecution.objects.create(
        namespace=NAMESPACE,
        job_id=row.job_id,
        owner="worker-1",
        epoch=1,
        started_at=timezone.now(),
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )
    return row


def test_a_running_job_offers_cancel_and_its_confirmation_says_it_is_asked_to_stop(
    operator_client, running
):
    page = operator_client.get(reverse("admin:later_dashboard_job", args=[running.job_id]))
    assert 'class="button later-action-cancel"' in page.content.decode()
    confirm = operator_client.get(action_url(running.job_id, "cancel")).content.decode()
    sees = "a running one is asked to stop: its task sees <code>context.cancel_requested</code>"
    assert sees in confirm
    assert "interrupted if it runs on 10 s after its worker hears of the cancel" in confirm


def test_cancelling_a_running_job_asks_it_to_stop_and_the_page_says_so(operator_client, running):
    response = operator_client.post(
        action_url(running.job_id, "cancel"), {"reason": "wrong warehouse"}
    )
    assert stage_of(running.job_id) == "running"
    [message] = messages_of(response)
    assert message.startswith(f"Job {running.job_id}: cancel requested. The running job was asked")
    row = JobIndexRow.objects.get(job_id=running.job_id)
    assert row.cancel_requested_at is not None
    html = operator_client.get(response["Location"]).content.decode()
    assert 'id="later-stopping"' in html
    assert 'id="later-cancel-requested"' in html
    assert "wrong warehouse" in html
    assert "later-action-cancel" not in html  # asked already


def test_bulk_cancel_of_running_jobs_counts_those_asked_to_stop(operator_client, running, make_job):
    url = reverse("admin:later_dashboard_bulk", args=["running"])
    response = operator_client.post(
        url, {"action": "cancel", "job_id": [running.job_id], "confirmed": "yes"}
    )
    [message] = messages_of(response)
    assert message.startswith("The running job was asked to stop")
    assert JobIndexRow.objects.get(job_id=running.job_id).cancel_requested_at is not None
