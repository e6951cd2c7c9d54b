"""A job or schedule whose stored bytes cannot be decoded can be opened, understood and removed."""

import logging

import pytest
from django.contrib.messages import get_messages
from django.urls import reverse

import later_django
from later_django.exceptions import InvalidTransition, PayloadDecodeError, UndecodableJob
from later_django.jobs import cancel_job, get_job, retry_job
from later_django.models import DeliveryCommand, JobIndexRow, Schedule, StorageValue
from later_django.records import JobRecord, job_key
from later_django.tasks_api import TaskResultStatus, default_task_backend
from tests import tasks

from .conftest import NAMESPACE, store_record

pytestmark = pytest.mark.django_db

GARBAGE = b"\xc1\xff"
CAUSE = "cannot be decoded (FormatError); it must be a msgpack map written by later_django."


def corrupt(job_id: str) -> None:
    updated = StorageValue.objects.filter(namespace=NAMESPACE, key=job_key(job_id)).update(
        value=GARBAGE
    )
    assert updated == 1


def broken_job(make_job, stage: str, **fields) -> JobIndexRow:
    row = make_job(stage, task_path="tests.tasks.record", queue_name="emails", **fields)
    store_record(row, args=["secret"])
    corrupt(row.job_id)
    return row


def page(client, name: str, *args: str):
    return client.get(reverse(f"admin:later_dashboard_{name}", args=args))


def test_the_job_page_shows_the_index_row_and_why_the_record_is_unreadable(
    operator_client, make_job
):
    row = broken_job(make_job, "failed", attempts=2, worker_id="w-7")
    response = page(operator_client, "job", row.job_id)
    html = response.content.decode()
    assert response.status_code == 200
    assert (
        f"This job's stored record cannot be decoded: Stored record of job "
        f"&#x27;{row.job_id}&#x27; {CAUSE}"
    ) in html
    for shown in ("tests.tasks.record", "emails", "w-7"):
        assert shown in html
    assert "Stored 2 bytes: c1 ff" in html
    assert 'id="later-args"' not in html
    assert "later-action-delete" in html
    assert "later-action-retry" not in html  # its arguments are lost


@pytest.mark.parametrize(("stage", "action"), [("failed", "retry"), ("failed", "delete")])
def test_action_pages_render_for_an_unreadable_job(operator_client, make_job, stage, action):
    row = broken_job(make_job, stage)
    response = page(operator_client, "action", row.job_id, action)
    assert response.status_code == 200
    assert "later-decode-error" in response.content.decode()


def test_the_cancel_page_renders_and_cancels_an_unreadable_pending_job(operator_client, make_job):
    row = broken_job(make_job, "enqueued")  # make_job writes its delivery command
    assert DeliveryCommand.objects.filter(job_id=row.job_id).exists()
    url = reverse("admin:later_dashboard_action", args=[row.job_id, "cancel"])
    assert operator_client.get(url).status_code == 200
    response = operator_client.post(url, {"reason": "broken bytes"})
    assert response.status_code == 302
    assert JobIndexRow.objects.get(job_id=row.job_id).stage == "cancelled"
    assert not DeliveryCommand.objects.filter(job_id=row.job_id).exists()
    view = get_job(row.job_id, namespace=NAMESPACE)
    assert view.cancel_reason == "broken bytes"
    assert view.record.original_bytes == GARBAGE
    assert view.decode_error == f"Stored record of job {row.job_id!r} {CAUSE}"


def test_an_unreadable_finished_job_can_be_deleted(operator_client, make_job):
    row = broken_job(make_job, "failed")
    url = reverse("admin:later_dashboard_action", args=[row.job_id, "delete"])
    response = operator_client.post(url)
    assert response.status_code == 302
    assert not JobIndexRow.objects.filter(job_id=row.job_id).exists()
    assert not StorageValue.objects.filter(key=job_key(row.job_id)).exists()


def test_bulk_actions_list_and_refuse_unreadable_jobs_one_by_one(operator_client, make_job):
    broken = broken_job(make_job, "failed")
    fine = make_job("failed")
    store_record(fine)
    bulk = reverse("admin:later_dashboard_bulk", args=["failed"])
    chosen = {"action": "retry", "job_id": [broken.job_id, fine.job_id]}
    confirm = operator_client.post(bulk, chosen)
    assert confirm.status_code == 200
    assert confirm.content.decode().count("later-decode-error") == 1
    done = operator_client.post(bulk, {**chosen, "confirmed": "yes"})
    assert done.status_code == 302
    said = [str(m) for m in get_messages(done.wsgi_request)]
    assert "1 job retried." in said
    assert any(m.startswith(f"Job {broken.job_id!r} cannot be retried because") for m in said)
    assert JobIndexRow.objects.get(job_id=broken.job_id).stage == "failed"


def test_retry_refuses_an_unreadable_job_naming_it_and_the_decode_error(make_job):
    row = broken_job(make_job, "failed")
    with pytest.raises(UndecodableJob) as raised:
        retry_job(row.job_id, namespace=NAMESPACE)
    assert str(raised.value) == (
        f"Job {row.job_id!r} cannot be retried because its arguments are lost: Stored record "
        f"of job {row.job_id!r} {CAUSE} Delete it and enqueue the call again."
    )
    assert isinstance(raised.value, InvalidTransition | PayloadDecodeError)
    assert JobIndexRow.objects.get(job_id=row.job_id).stage == "failed"


def test_cancel_cancels_an_unreadable_pending_job_and_keeps_its_bytes(make_job):
    row = broken_job(make_job, "delayed")
    cancel_job(row.job_id, namespace=NAMESPACE, reason="stop")
    index = JobIndexRow.objects.get(job_id=row.job_id)
    assert index.stage == "cancelled"
    stored = StorageValue.objects.get(key=job_key(row.job_id))
    assert stored.date_expire == index.date_expire is not None
    record = JobRecord.decode(bytes(stored.value), job_id=row.job_id)
    assert (record.stage, record.cancel_reason, record.original_bytes) == (
        "cancelled",
        "stop",
        GARBAGE,
    )
    with pytest.raises(UndecodableJob):
        retry_job(row.job_id, namespace=NAMESPACE)


def test_get_result_of_an_unreadable_job_reports_the_decode_error(make_job):
    row = broken_job(make_job, "enqueued")
    result = default_task_backend.get_result(row.job_id)
    assert result.status == TaskResultStatus.READY
    assert result.task.module_path == "tests.tasks.record"
    assert (result.args, result.kwargs) == ([], {})
    [error] = result.errors
    assert error.exception_class_path == "later_django.exceptions.PayloadDecodeError"
    assert error.traceback == (
        f"later_django.exceptions.PayloadDecodeError: Stored record of job {row.job_id!r} {CAUSE}\n"
    )


def corrupt_schedule(identifier: str) -> None:
    assert Schedule.objects.filter(identifier=identifier).update(payload=GARBAGE) == 1


SCHEDULE_CAUSE = (
    "Stored call of schedule 'nightly' cannot be decoded (FormatError); it must be a msgpack "
    "map of args, kwargs, queue_name and priority. Schedule it again to replace it, or "
    "unschedule it."
)


def test_list_schedules_marks_an_unreadable_schedule_and_lists_the_rest(caplog):
    later_django.schedule("hourly", "@hourly", tasks.record, "a", "b")
    later_django.schedule("nightly", "@daily", tasks.record, "c", "d")
    corrupt_schedule("nightly")
    with caplog.at_level(logging.ERROR, "later_django.schedules.store"):
        found = later_django.list_schedules()
    assert [(s.identifier, s.error) for s in found] == [
        ("hourly", None),
        ("nightly", SCHEDULE_CAUSE),
    ]
    assert (found[1].args, found[1].kwargs, found[1].task_path) == ([], {}, "tests.tasks.record")
    assert f"schedule identifier=nightly unreadable: {SCHEDULE_CAUSE}" in caplog.messages


def test_the_schedules_page_renders_an_unreadable_schedule_with_its_error(viewer_client):
    later_django.schedule("hourly", "@hourly", tasks.record, "a", "b")
    later_django.schedule("nightly", "@daily", tasks.record, "c", "d")
    corrupt_schedule("nightly")
    response = viewer_client.get(reverse("admin:later_dashboard_schedules"))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="schedule-hourly"' in html
    assert 'id="schedule-nightly"' in html
    assert SCHEDULE_CAUSE.replace("'", "&#x27;") in html


def test_scheduling_again_replaces_an_unreadable_call():
    later_django.schedule("nightly", "@daily", tasks.record, "c", "d")
    corrupt_schedule("nightly")
    later_django.schedule("nightly", "@daily", tasks.record, "e", "f")
    [info] = later_django.list_schedules()
    assert (info.error, info.args) == (None, ["e", "f"])
