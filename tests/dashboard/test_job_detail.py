"""Job detail: arguments, errors, history, partition neighbours, continuations, lease."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from later_django.models import JobExecution, PartitionLease
from later_django.records import Attempt, ErrorEntry, to_micros

from .conftest import NAMESPACE, store_record

pytestmark = pytest.mark.django_db

EVIL = "<img src=x onerror=alert(1)>"


def detail(client, job_id):
    return client.get(reverse("admin:later_dashboard_job", args=[job_id]))


def test_detail_shows_the_task_arguments_and_every_error(viewer_client, make_job):
    row = make_job("failed", attempts=2, task_path="shop.tasks.charge")
    now = to_micros(timezone.now())
    store_record(
        row,
        args=[1, "two"],
        kwargs={"order": 7},
        max_attempts=2,
        attempts=[Attempt("w-1", now, now, "error"), Attempt("w-2", now, now, "error")],
        errors=[
            ErrorEntry("builtins.KeyError", "Traceback ...\nKeyError: 'first'", now, "w-1"),
            ErrorEntry("builtins.ValueError", "Traceback ...\nValueError: second", now, "w-2"),
        ],
    )
    response = detail(viewer_client, row.job_id)
    html = response.content.decode()
    assert response.status_code == 200
    assert "shop.tasks.charge" in html
    assert "&quot;two&quot;" in html
    assert "&quot;order&quot;: 7" in html
    assert "KeyError: &#x27;first&#x27;" in html
    assert "ValueError: second" in html
    assert "2 of 2" in html
    assert "w-1" in html
    assert "w-2" in html


def test_user_data_is_escaped_everywhere(viewer_client, make_job):
    row = make_job("success", task_path=EVIL, queue_name=EVIL)
    now = to_micros(timezone.now())
    store_record(
        row,
        task_path=EVIL,
        queue_name=EVIL,
        args=[EVIL],
        kwargs={EVIL: EVIL},
        return_value={"html": EVIL},
        errors=[ErrorEntry(EVIL, EVIL, now, EVIL)],
        cancel_reason=EVIL,
    )
    html = detail(viewer_client, row.job_id).content.decode()
    assert EVIL not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_the_return_value_is_shown_for_a_successful_job(viewer_client, make_job):
    row = make_job("success")
    store_record(row, return_value={"total": 42})
    html = detail(viewer_client, row.job_id).content.decode()
    assert "&quot;total&quot;: 42" in html


def test_an_unknown_job_is_not_found(viewer_client):
    response = detail(viewer_client, "01jnothere0000000000000000")
    assert response.status_code == 404


def test_partition_neighbours_link_the_previous_and_next_job(viewer_client, make_job):
    common = {"topic": "orders", "partition": 3}
    first = make_job("success", sequence=1, **common)
    middle = make_job("running", sequence=2, **common)
    last = make_job("enqueued", sequence=3, **common)
    make_job("enqueued", sequence=2, topic="orders", partition=4)
    store_record(middle)
    context = detail(viewer_client, middle.job_id).context
    assert context["previous"].row.job_id == first.job_id
    assert context["following"].row.job_id == last.job_id
    assert context["partition_url"] == reverse(
        "admin:later_dashboard_partition", args=["orders", 3]
    )


def test_continuations_waiting_on_a_job_are_listed(viewer_client, make_job):
    parent = make_job("running")
    store_record(parent)
    child = make_job("waiting", parent_job_id=parent.job_id)
    make_job("waiting", parent_job_id="someoneelse000000000000000")
    context = detail(viewer_client, parent.job_id).context
    assert [c.row.job_id for c in context["continuations"]] == [child.job_id]
    store_record(child, parent_id=parent.job_id)
    child_page = detail(viewer_client, child.job_id)
    assert child_page.context["parent_url"] == reverse(
        "admin:later_dashboard_job", args=[parent.job_id]
    )


def test_a_running_job_shows_its_lease_owner_and_epoch(viewer_client, make_job):
    row = make_job("running")
    store_record(row)
    now = timezone.now()
    JobExecution.objects.create(
        namespace=NAMESPACE,
        job_id=row.job_id,
        owner="host:9:ab",
        epoch=4,
        started_at=now,
        lease_expires_at=now + timedelta(seconds=30),
    )
    lease = detail(viewer_client, row.job_id).context["lease"]
    assert (lease.kind, lease.owner, lease.epoch) == ("execution", "host:9:ab", 4)


def test_a_running_partition_head_shows_the_partition_lease(viewer_client, make_job):
    row = make_job("running", topic="orders", partition=1, sequence=5)
    store_record(row)
    PartitionLease.objects.create(
        namespace=NAMESPACE,
        topic="orders",
        partition=1,
        owner="host:1:cd",
        epoch=9,
        expires_at=timezone.now() + timedelta(seconds=30),
    )
    lease = detail(viewer_client, row.job_id).context["lease"]
    assert (lease.kind, lease.owner, lease.epoch) == ("partition", "host:1:cd", 9)


def test_actions_offered_follow_the_stage_and_the_permissions(
    operator_client, viewer_client, make_job
):
    failed = make_job("failed")
    store_record(failed)
    assert [a for a, _ in detail(operator_client, failed.job_id).context["actions"]] == [
        "retry",
        "delete",
    ]
    assert detail(viewer_client, failed.job_id).context["actions"] == []
    pending = make_job("delayed")
    store_record(pending)
    assert [a for a, _ in detail(operator_client, pending.job_id).context["actions"]] == ["cancel"]


def test_find_opens_a_job_by_id_or_says_it_is_missing(viewer_client, make_job):
    row = make_job("failed")
    url = reverse("admin:later_dashboard_find")
    found = viewer_client.get(url, {"job_id": row.job_id.upper()})
    assert found["Location"] == reverse("admin:later_dashboard_job", args=[row.job_id])
    missing = viewer_client.get(url, {"job_id": "<b>nope</b>"}, follow=True)
    html = missing.content.decode()
    assert "No job &#x27;&lt;b&gt;nope&lt;/b&gt;&#x27;" in html
