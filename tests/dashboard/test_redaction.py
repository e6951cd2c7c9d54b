"""LATER_REDACT on every page that shows a job or schedule, and cutting long values short."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.checks import Error
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone

from later_django import jobs as engine
from later_django import schedule
from later_django.checks import check_later_settings
from later_django.models import JobIndexRow
from later_django.records import ErrorEntry, to_micros
from later_django.schedules.ticking import run_due
from later_django.tasks_api import task_backends
from tests.conftest import wait_for

from . import tasks
from .conftest import NAMESPACE, store_record

SECRET = "hunter2-8c1f0b7e"
REDACT = "tests.dashboard.test_redaction.redact"
FAILING = "tests.dashboard.test_redaction.broken_redact"
HIDDEN = "arguments hidden: the redaction callable failed (RuntimeError)"
STAGES = ("delayed", "waiting", "enqueued", "running", "requeued", "success", "failed", "cancelled")


def _scrub(value: Any) -> Any:
    if isinstance(value, str):
        return "[redacted]" if SECRET in value else value
    if isinstance(value, list | tuple):
        return [_scrub(v) for v in value]
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items()}
    return value


def redact(task_path: str, args: list[Any], kwargs: dict[str, Any]) -> tuple[list, dict]:
    return _scrub(args), _scrub(kwargs)


def broken_redact(task_path: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    raise RuntimeError("cannot redact")


@pytest.fixture
def root_client() -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


def enqueue_every_kind(run_burst: Any) -> list[str]:
    """Jobs in every stage a person can reach, each carrying SECRET; return their ids."""
    ran = [
        tasks.keep_quiet.enqueue(SECRET, token={"card": SECRET}).id,
        tasks.fail_quietly.enqueue(SECRET, token=[SECRET]).id,
    ]
    run_burst()
    plain = tasks.keep_quiet.using(run_after=timedelta(hours=1)).enqueue(SECRET)
    child = tasks.keep_quiet.using(after=plain).enqueue(f"child {SECRET}")
    ordered = tasks.ordered.using(partition_key="k1").enqueue("k1", SECRET)
    pending = tasks.keep_quiet.enqueue(token=SECRET, secret=SECRET)
    cancelled = tasks.keep_quiet.enqueue(SECRET)
    engine.cancel_job(cancelled.id, namespace=NAMESPACE, reason="not needed")
    schedule("every-second", "* * * * * *", tasks.keep_quiet, SECRET, token=SECRET)
    schedule("sequential", "* * * * * *", tasks.keep_quiet, SECRET, sequential=True)
    backend = task_backends["default"]
    fired: list[str] = []
    wait_for(lambda: len(fired.extend(run_due(backend)) or fired) >= 2)  # type: ignore[func-returns-value]
    return [*ran, plain.id, child.id, ordered.id, pending.id, cancelled.id, *fired]


def every_page(client: Client, job_ids: list[str]) -> dict[str, str]:
    """The body of every page that could show a job or schedule, by URL."""
    urls = [
        reverse("admin:later_dashboard_changelist"),
        reverse("admin:later_dashboard_live"),
        reverse("admin:later_dashboard_topics"),
        reverse("admin:later_dashboard_schedules"),
        reverse("admin:later_dashboard_triage"),
        reverse("admin:later_jobindexrow_changelist"),
    ]
    urls += [
        reverse("admin:later_dashboard_schedule_action", args=[action, identifier])
        for identifier in ("every-second", "sequential")
        for action in ("pause", "run")
    ]
    urls += [reverse("admin:later_dashboard_jobs", args=[s]) for s in STAGES]
    urls += [reverse("admin:later_jobindexrow_changelist") + f"?stage__exact={s}" for s in STAGES]
    for topic, count in (("orders", 8), ("later.schedules", 16)):
        urls.append(reverse("admin:later_dashboard_topic", args=[topic]))
        urls += [reverse("admin:later_dashboard_partition", args=[topic, p]) for p in range(count)]
    for job_id in job_ids:
        page = reverse("admin:later_dashboard_job", args=[job_id])
        urls += [page, page + "?full=args", page + "?full=args,return,errors,reason"]
        urls += [
            reverse("admin:later_dashboard_action", args=[job_id, action])
            for action in ("retry", "cancel", "delete")
        ]
        row = JobIndexRow.objects.get(namespace=NAMESPACE, job_id=job_id)
        urls.append(reverse("admin:later_jobindexrow_change", args=[row.pk]))
    bodies = {}
    for url in urls:
        response = client.get(url)
        assert response.status_code == 200, url
        bodies[url] = response.content.decode()
    for stage in STAGES:
        url = reverse("admin:later_dashboard_bulk", args=[stage])
        for action in ("retry", "cancel", "delete"):
            response = client.post(url, {"action": action, "job_id": job_ids})
            assert response.status_code == 200, (url, action)
            bodies[f"{url} {action}"] = response.content.decode()
    return bodies


@pytest.mark.django_db(transaction=True)
def test_no_page_shows_a_redacted_secret(root_client, run_burst):
    job_ids = enqueue_every_kind(run_burst)
    stages = set(JobIndexRow.objects.values_list("stage", flat=True))
    assert {"delayed", "waiting", "enqueued", "success", "failed", "cancelled"} <= stages

    with override_settings(LATER_REDACT=REDACT):
        bodies = every_page(root_client, job_ids)

    assert [url for url, body in bodies.items() if SECRET in body] == []
    shown = "".join(bodies.values())
    assert "[redacted]" in shown  # on job pages and the schedules page
    assert shown.count("[redacted]") >= len(job_ids)


@pytest.mark.django_db(transaction=True)
def test_without_redaction_the_same_pages_show_the_secret(root_client, run_burst):
    """The control for the test above: the pages it reads do show arguments."""
    job_ids = enqueue_every_kind(run_burst)
    bodies = every_page(root_client, job_ids)
    leaking = {url.split("?")[0] for url, body in bodies.items() if SECRET in body}
    assert reverse("admin:later_dashboard_schedules") in leaking
    assert {reverse("admin:later_dashboard_job", args=[j]) for j in job_ids} <= leaking


@pytest.mark.django_db(transaction=True)
def test_a_failing_redaction_hides_every_argument_and_is_logged(root_client, caplog):
    job = tasks.keep_quiet.enqueue(SECRET, token=SECRET)
    schedule("nightly", "0 3 * * *", tasks.keep_quiet, SECRET)
    caplog.set_level(logging.ERROR, logger="later_django.dashboard.redaction")

    with override_settings(LATER_REDACT=FAILING):
        pages = [
            root_client.get(reverse("admin:later_dashboard_job", args=[job.id]) + "?full=args"),
            root_client.get(reverse("admin:later_dashboard_schedules")),
        ]

    for response in pages:
        body = response.content.decode()
        assert response.status_code == 200
        assert HIDDEN in body
        assert SECRET not in body
    assert 'id="later-args"' not in pages[0].content.decode()
    failures = [r for r in caplog.records if r.exc_info]
    assert len(failures) == 2
    assert "LATER_REDACT callable tests.dashboard.test_redaction.broken_redact failed" in (
        failures[0].getMessage()
    )
    assert SECRET not in caplog.text


@pytest.mark.django_db
@pytest.mark.parametrize(
    "returned", [None, ([SECRET],), "args", ([SECRET], [SECRET]), {"args": [SECRET]}]
)
def test_a_redaction_returning_anything_but_args_and_kwargs_fails_closed(
    viewer_client, make_job, returned
):
    row = make_job("enqueued")
    store_record(row, args=[SECRET])
    global _returned
    _returned = returned
    with override_settings(LATER_REDACT="tests.dashboard.test_redaction.returns_fixed"):
        body = viewer_client.get(reverse("admin:later_dashboard_job", args=[row.job_id]))
    html = body.content.decode()
    assert "arguments hidden: the redaction callable failed (TypeError)" in html
    assert SECRET not in html


_returned: Any = None


def returns_fixed(task_path: str, args: list[Any], kwargs: dict[str, Any]) -> Any:
    return _returned


@pytest.mark.django_db
def test_long_arguments_are_cut_with_a_link_to_all_of_them(viewer_client, make_job):
    row = make_job("success")
    long_text = "x" * 4_990 + "THE-END"
    store_record(row, args=[long_text], return_value="r" * 3_000 + "RETURN-END")
    url = reverse("admin:later_dashboard_job", args=[row.job_id])

    cut = viewer_client.get(url).content.decode()
    whole = viewer_client.get(url + "?full=args").content.decode()

    assert "THE-END" not in cut
    assert "RETURN-END" not in cut
    # pretty() shows a list of one quoted string over three lines: 5,005 characters
    assert "The last 3,005 of 5,005 characters are not shown." in cut
    assert f'href="{url}?full=args"' in cut
    assert f'href="{url}?full=return"' in cut
    assert "THE-END" in whole
    assert "RETURN-END" not in whole  # only what was asked for
    assert f'href="{url}?full=args%2Creturn"' in whole


@pytest.mark.django_db
def test_long_tracebacks_keep_their_end_and_say_how_many_lines_were_cut(viewer_client, make_job):
    row = make_job("failed")
    lines = [f'  File "app.py", line {n}, in step' for n in range(300)]
    traceback = "\n".join(["Traceback (most recent call last):", *lines, "ValueError: last"])
    now = to_micros(timezone.now())
    store_record(row, errors=[ErrorEntry("builtins.ValueError", traceback, now, "w-1")])
    url = reverse("admin:later_dashboard_job", args=[row.job_id])

    cut = viewer_client.get(url).content.decode()
    whole = viewer_client.get(url + "?full=errors").content.decode()

    assert "ValueError: last" in cut
    assert "Traceback (most recent call last):" not in cut
    assert "The first 202 of 302 lines" in cut
    assert f'href="{url}?full=errors"' in cut
    assert "Traceback (most recent call last):" in whole
    assert "are not shown" not in whole


@pytest.mark.django_db
def test_a_long_cancel_reason_is_cut(viewer_client, make_job):
    row = make_job("cancelled")
    store_record(row, cancel_reason="because " * 400 + "REASON-END")
    url = reverse("admin:later_dashboard_job", args=[row.job_id])

    assert "REASON-END" not in viewer_client.get(url).content.decode()
    assert "REASON-END" in viewer_client.get(url + "?full=reason").content.decode()


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (
            "tests.dashboard.nowhere.redact",
            "importing it fails (ModuleNotFoundError: No module named",
        ),
        ("tests.dashboard.test_redaction.missing", "importing it fails (ImportError: Module"),
        ("tests.dashboard.test_redaction.SECRET", "it names a str, which is not callable"),
    ],
)
def test_a_bad_redact_path_is_a_check_error_naming_it(value, why):
    with override_settings(LATER_REDACT=value):
        [error] = check_later_settings()
    assert isinstance(error, Error)
    assert error.id == "later.E001"
    assert error.msg.startswith(
        f"LATER_REDACT is {value!r}; it must be the dotted path of an importable callable, "
        f"but {why}"
    )


@pytest.mark.parametrize("value", [REDACT, None])
def test_a_callable_path_or_none_passes_the_check(value):
    with override_settings(LATER_REDACT=value):
        assert check_later_settings() == []


def test_an_empty_or_non_string_redact_is_a_check_error():
    for value in ("", 3):
        with override_settings(LATER_REDACT=value):
            [error] = check_later_settings()
        assert error.msg == f"LATER_REDACT is {value!r}; it must be None or a non-empty string."
