"""Only active staff with the job model's view permission see the dashboard at all."""

import pytest
from django.test import Client
from django.urls import reverse

from .conftest import new_user

pytestmark = pytest.mark.django_db

JOB = "01jaccess000000000000000001"
PAGES = [
    reverse("admin:later_dashboard_changelist"),
    reverse("admin:later_dashboard_live"),
    reverse("admin:later_dashboard_find") + "?job_id=" + JOB,
    reverse("admin:later_dashboard_jobs", args=["failed"]),
    reverse("admin:later_dashboard_job", args=[JOB]),
    reverse("admin:later_dashboard_action", args=[JOB, "retry"]),
    reverse("admin:later_dashboard_schedules"),
    reverse("admin:later_dashboard_topics"),
    reverse("admin:later_dashboard_topic", args=["orders"]),
    reverse("admin:later_dashboard_partition", args=["orders", 0]),
]


def test_dashboard_lives_under_the_later_app_in_the_admin():
    assert PAGES[0] == "/admin/later/dashboard/"
    assert PAGES[4] == f"/admin/later/dashboard/job/{JOB}/"


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_visitors_are_sent_to_the_login_page(url):
    response = Client().get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")


@pytest.mark.parametrize("url", PAGES)
def test_users_who_are_not_staff_are_sent_to_the_login_page(url):
    client = Client()
    client.force_login(new_user("customer", staff=False, perms=("view_jobindexrow",)))
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")


@pytest.mark.parametrize("url", PAGES)
def test_staff_without_the_view_permission_are_refused(url):
    client = Client()
    client.force_login(new_user("intern", perms=("view_topic",)))
    response = client.get(url)
    assert response.status_code == 403
    assert b"later-tile" not in response.content


def test_bulk_actions_refuse_staff_without_the_view_permission():
    client = Client()
    client.force_login(new_user("intern"))
    url = reverse("admin:later_dashboard_bulk", args=["failed"])
    response = client.post(url, {"action": "retry", "job_id": [JOB]})
    assert response.status_code == 403


def test_the_admin_index_links_the_dashboard_for_viewers_only(viewer_client):
    index = viewer_client.get("/admin/").content.decode()
    assert 'href="/admin/later/dashboard/"' in index
    intern = Client()
    intern.force_login(new_user("intern"))
    assert 'href="/admin/later/dashboard/"' not in intern.get("/admin/").content.decode()


def test_viewers_may_open_every_read_only_page(viewer_client):
    assert viewer_client.get(PAGES[0]).status_code == 200
    assert viewer_client.get(PAGES[1]).status_code == 200
    assert viewer_client.get(PAGES[3]).status_code == 200
    assert viewer_client.get(PAGES[6]).status_code == 200


def test_viewers_may_not_open_action_pages(viewer_client):
    response = viewer_client.get(PAGES[5])
    assert response.status_code == 403


def test_retry_and_cancel_need_change_and_delete_needs_delete(make_job):
    row = make_job("failed")
    client = Client()
    client.force_login(new_user("changer", perms=("view_jobindexrow", "change_jobindexrow")))
    retry = reverse("admin:later_dashboard_action", args=[row.job_id, "retry"])
    delete = reverse("admin:later_dashboard_action", args=[row.job_id, "delete"])
    assert client.post(delete).status_code == 403
    client.force_login(new_user("deleter", perms=("view_jobindexrow", "delete_jobindexrow")))
    assert client.post(retry).status_code == 403


def test_unknown_actions_are_not_found(operator_client):
    url = reverse("admin:later_dashboard_action", args=[JOB, "explode"])
    assert operator_client.get(url).status_code == 404
