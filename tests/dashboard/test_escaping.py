"""Nothing a request sends or a row stores reaches a dashboard page unescaped."""

from urllib.parse import quote

import pytest
from django.urls import reverse
from django.utils import timezone

import later_django
from later_django.models import LogConsumerOffset, Schedule, Topic
from later_django.records import ErrorEntry, to_micros
from tests import tasks

from .conftest import NAMESPACE, store_record

pytestmark = pytest.mark.django_db

PAYLOADS = ["<script>x</script>", '"><img src=x onerror=1>']
ESCAPED = {
    PAYLOADS[0]: "&lt;script&gt;x&lt;/script&gt;",
    PAYLOADS[1]: "&quot;&gt;&lt;img src=x onerror=1&gt;",
}


@pytest.fixture
def parcels():
    return Topic.objects.create(
        namespace=NAMESPACE, name="parcels", partition_count=4, created_at=timezone.now()
    )


def urls_with(payload: str, job_id: str) -> list[tuple[str, dict[str, str]]]:
    """Each dashboard URL that reads request data, with ``payload`` in every parameter."""
    jobs = reverse("admin:later_dashboard_jobs", args=["failed"])
    return [
        (jobs, {"after": payload}),
        (jobs, {"task": payload, "queue": payload}),
        (jobs, {"task": payload, "queue": payload, "after": "1700000000000000.5"}),
        (reverse("admin:later_dashboard_changelist"), {"namespace": payload}),
        (reverse("admin:later_dashboard_live"), {"namespace": payload}),
        (reverse("admin:later_dashboard_job", args=[job_id]), {"namespace": payload}),
        (reverse("admin:later_dashboard_topic", args=["parcels"]), {"from": payload}),
        (reverse("admin:later_dashboard_partition", args=["parcels", 1]), {"below": payload}),
        (reverse("admin:later_dashboard_schedules"), {"namespace": payload}),
        (reverse("admin:later_dashboard_topics"), {"namespace": payload}),
    ]


@pytest.mark.parametrize("payload", PAYLOADS)
def test_query_parameters_are_never_reflected_unescaped(
    operator_client, make_job, parcels, payload
):
    row = make_job("failed")
    store_record(row)
    for url, params in urls_with(payload, row.job_id):
        response = operator_client.get(url, params)
        assert response.status_code in (200, 400, 404), (url, params, response.status_code)
        assert payload not in response.content.decode(), (url, params)


@pytest.mark.parametrize("payload", PAYLOADS)
def test_a_bad_cursor_answers_400_with_the_cursor_escaped(viewer_client, payload):
    url = reverse("admin:later_dashboard_jobs", args=["failed"])
    response = viewer_client.get(url, {"after": payload})
    body = response.content.decode()
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
    assert payload not in body
    assert ESCAPED[payload] in body
    assert "is not valid; it must be" in body


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("topic", {"from": "<b>1</b>"}, "&#x27;from&#x27; is &#x27;&lt;b&gt;1&lt;/b&gt;&#x27;"),
        ("partition", {"below": "<b>1</b>"}, "&#x27;below&#x27; is &#x27;&lt;b&gt;1&lt;/b&gt;"),
        ("partition", {"below": str(2**63)}, f"&#x27;below&#x27; is &#x27;{2**63}&#x27;"),
    ],
)
def test_bad_paging_parameters_answer_400_naming_the_value(
    viewer_client, parcels, name, params, message
):
    args = ["parcels"] if name == "topic" else ["parcels", 1]
    response = viewer_client.get(reverse(f"admin:later_dashboard_{name}", args=args), params)
    assert response.status_code == 400
    assert message in response.content.decode()


def test_a_cursor_beyond_a_64_bit_row_id_is_a_bad_request(viewer_client):
    url = reverse("admin:later_dashboard_jobs", args=["failed"])
    response = viewer_client.get(url, {"after": f"1700000000000000.{2**64}"})
    assert response.status_code == 400
    assert "names a row id out of range" in response.content.decode()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_path_parts_are_never_reflected_unescaped(operator_client, make_job, payload):
    part = quote(payload, safe="")
    row = make_job("failed")
    store_record(row)
    base = "/admin/later/dashboard"
    for url in [
        f"{base}/jobs/{part}/",
        f"{base}/job/{part}/",
        f"{base}/job/{row.job_id}/{part}/",
        f"{base}/topics/{part}/",
        f"{base}/topics/{part}/0/",
    ]:
        response = operator_client.get(url)
        assert response.status_code == 404, url
        assert payload not in response.content.decode(), url


@pytest.mark.parametrize("payload", PAYLOADS)
def test_the_job_finder_and_bulk_forms_do_not_reflect_input(operator_client, make_job, payload):
    found = operator_client.get(
        reverse("admin:later_dashboard_find"), {"job_id": payload}, follow=True
    )
    assert payload not in found.content.decode()
    assert ESCAPED[payload] in found.content.decode()

    row = make_job("failed")
    store_record(row)
    bulk = reverse("admin:later_dashboard_bulk", args=["failed"])
    back = reverse("admin:later_dashboard_jobs", args=["failed"]) + "?task=" + payload
    confirm = operator_client.post(
        bulk, {"action": "delete", "job_id": [row.job_id, payload], "back": back}
    )
    assert confirm.status_code == 200
    assert payload not in confirm.content.decode()
    done = operator_client.post(
        bulk,
        {"action": "delete", "job_id": [row.job_id, payload], "back": back, "confirmed": "yes"},
        follow=True,
    )
    assert payload not in done.content.decode()


@pytest.mark.parametrize("payload", PAYLOADS)
def test_stored_values_are_escaped_on_every_page_that_shows_them(
    operator_client, make_job, payload
):
    row = make_job("failed", task_path=payload, queue_name=payload)
    now = to_micros(timezone.now()) or 0
    store_record(
        row,
        task_path=payload,
        queue_name=payload,
        args=[payload],
        kwargs={payload: payload},
        errors=[ErrorEntry(payload, f"Traceback ...\nValueError: {payload}", now, payload)],
        cancel_reason=payload,
        schedule=payload,
    )
    later_django.schedule("evil", "@daily", tasks.record, payload, note=payload)
    # Identifiers and task paths are checked when scheduling; a row written otherwise is not.
    Schedule.objects.filter(identifier="evil").update(identifier=payload, task_path=payload)
    LogConsumerOffset.objects.create(
        namespace=NAMESPACE,
        group=payload,
        topic=payload,
        partition=0,
        next_offset=0,
        updated_at=timezone.now(),
    )
    pages = [
        reverse("admin:later_dashboard_job", args=[row.job_id]),
        reverse("admin:later_dashboard_action", args=[row.job_id, "delete"]),
        reverse("admin:later_dashboard_action", args=[row.job_id, "retry"]),
        reverse("admin:later_dashboard_jobs", args=["failed"]),
        reverse("admin:later_dashboard_schedules"),
        reverse("admin:later_dashboard_topics"),
        reverse("admin:later_jobindexrow_changelist"),
    ]
    for url in pages:
        response = operator_client.get(url)
        body = response.content.decode()
        assert response.status_code == 200, url
        assert payload not in body, url
        assert ESCAPED[payload] in body, url
