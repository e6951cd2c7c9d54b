"""Bad input, one table per surface: each gets a clear error, and nothing committed is lost.

Every row feeds one bad value through a public surface (task arguments,
``enqueue_many``, ``using()``, cron strings, settings and OPTIONS, worker
flags, dashboard URLs, stored bytes) and checks two things: the error names
the value and what is allowed, and the database holds exactly what it held
before (a job committed earlier is still there, and nothing half-made was
added). docs/errors.md lists the same inputs for readers.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.urls import reverse

from later_django import list_schedules, schedule
from later_django.checks import check_later_settings
from later_django.exceptions import InvalidArgument, LaterError
from later_django.models import DeliveryCommand, JobIndexRow, Schedule, StorageValue
from later_django.records import job_key
from later_django.tasks_api import InvalidTask, TaskResultStatus, check_tasks
from tests import tasks
from tests.dashboard.conftest import operator, operator_client  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

JSON_RULE = "task arguments must be JSON values"


def held() -> tuple[int, int, int, int]:
    """What the database holds: jobs, stored values, delivery commands, schedules."""
    return (
        JobIndexRow.objects.count(),
        StorageValue.objects.count(),
        DeliveryCommand.objects.count(),
        Schedule.objects.count(),
    )


@pytest.fixture
def nothing_lost():
    """A job committed before the bad input is intact after it, and nothing was added."""
    witness = tasks.record.enqueue("witness", 1)
    before = held()
    yield
    assert held() == before
    witness.refresh()
    assert witness.status == TaskResultStatus.READY
    assert witness.args == ["witness", 1]


# -- task arguments and enqueue options ------------------------------------------------------

NAIVE = datetime(2030, 1, 1, 12, 0)

ENQUEUE: list[tuple[str, Callable[[], Any], type[BaseException], str]] = [
    (
        "a set argument",
        lambda: tasks.record.enqueue({1, 2}, 1),
        TypeError,
        f"Argument #0 (positional) of task 'tests.tasks.record' is {{1, 2}} of type set; "
        f"{JSON_RULE}",
    ),
    (
        "bytes that are not UTF-8 (Django turns UTF-8 bytes into text)",
        lambda: tasks.record.enqueue(b"\xff", 1),
        TypeError,
        "is b'\\xff' of type bytes; " + JSON_RULE,
    ),
    (
        "an object in a keyword argument",
        lambda: tasks.record.enqueue("k", value=object()),
        TypeError,
        "Argument 'value' of task 'tests.tasks.record' is <object object at",
    ),
    (
        "an integer beyond 64 bits",
        lambda: tasks.record.enqueue(2**70, 1),
        TypeError,
        "is 1180591620717411303424 of type int; " + JSON_RULE,
    ),
    (
        "a datetime",
        lambda: tasks.record.enqueue(NAIVE, 1),
        TypeError,
        "is datetime.datetime(2030, 1, 1, 12, 0) of type datetime; " + JSON_RULE,
    ),
    (
        "priority above 100",
        lambda: tasks.record.using(priority=101).enqueue("k", 1),
        InvalidTask,
        "priority must be a whole number between -100 and 100. It is 101",
    ),
    (
        "a fractional priority",
        lambda: tasks.record.using(priority=3.5).enqueue("k", 1),  # type: ignore[arg-type]
        InvalidTask,
        "priority must be a whole number between -100 and 100. It is 3.5",
    ),
    (
        "a naive run_after",
        lambda: tasks.record.using(run_after=NAIVE).enqueue("k", 1),
        InvalidTask,
        "run_after must be an aware datetime. It is datetime.datetime(2030, 1, 1, 12, 0)",
    ),
    (
        "an unknown queue",
        lambda: tasks.record.using(queue_name="nope").enqueue("k", 1),
        InvalidTask,
        "Queue 'nope' is not valid for backend. queue_name is 'nope'; it must be one of the "
        "QUEUES of task backend 'default': default, emails, slow.",
    ),
    (
        "enqueue_many: a string as args",
        lambda: tasks.record.enqueue_many([(("k", 1), {}), ("ab", {})]),
        TypeError,
        "enqueue_many: calls[1] has args 'ab' of type str; args must be a list or tuple",
    ),
    (
        "enqueue_many: a keyword that is not a str",
        lambda: tasks.record.enqueue_many([(("k",), {1: 2})]),
        TypeError,
        "enqueue_many: calls[0] has the keyword 1 of type int; keyword names must be str.",
    ),
    (
        "enqueue_many: None as kwargs",
        lambda: tasks.record.enqueue_many([(("k", 1), {}), (("k", 2), {}), ((1, 2), None)]),
        TypeError,
        "enqueue_many: calls[2] has kwargs None of type NoneType; kwargs must be a dict",
    ),
    (
        "enqueue_many: a call that is not a pair",
        lambda: tasks.record.enqueue_many([("k", 1, {})]),
        TypeError,
        "enqueue_many: calls[0] is ('k', 1, {}); it must be an (args, kwargs) tuple.",
    ),
    (
        "enqueue_many: an unserialisable argument in the third call",
        lambda: tasks.record.enqueue_many([(("a", 1), {}), (("b", 2), {}), ((object(), 3), {})]),
        TypeError,
        JSON_RULE,
    ),
]


@pytest.mark.parametrize(
    ("what", "call", "error", "message"), ENQUEUE, ids=[row[0] for row in ENQUEUE]
)
def test_bad_task_input_is_refused_at_enqueue(nothing_lost, what, call, error, message):
    with pytest.raises(error) as raised:
        call()
    assert message in str(raised.value)


# -- cron strings and schedules ---------------------------------------------------------------

CRON: list[tuple[str, str, Any, str]] = [
    ("a minute out of range", "61 * * * *", tasks.record, "its minute field '61' is not valid"),
    (
        "three fields",
        "* * *",
        tasks.record,
        "cron is '* * *', which has 3 fields; it must be 5 fields",
    ),
    ("a date that never comes", "0 0 30 2 *", tasks.record, "which never matches a real date"),
    ("a zero step", "*/0 * * * *", tasks.record, "its minute field '*/0' is not valid"),
    (
        "a task path that does not import",
        "* * * * *",
        "tests.tasks.nope",
        "task is 'tests.tasks.nope'; Task 'tests.tasks.nope' cannot be imported",
    ),
]


@pytest.mark.parametrize(("what", "cron", "task", "message"), CRON, ids=[r[0] for r in CRON])
def test_a_bad_schedule_is_refused_and_stores_nothing(nothing_lost, what, cron, task, message):
    with pytest.raises(InvalidArgument) as raised:
        schedule("nightly", cron, task, "k", 1)
    assert message in str(raised.value)


def test_a_bad_schedule_identifier_is_refused(nothing_lost):
    with pytest.raises(InvalidArgument, match=r"^identifier is 'a b'; it must be 1-100"):
        schedule("a b", "* * * * *", tasks.record, "k", 1)


# -- settings and OPTIONS ---------------------------------------------------------------------

SETTINGS: list[tuple[dict[str, Any], str, str]] = [
    (
        {"LATER_POLL_INTERVAL": float("nan")},
        "later.E001",
        "LATER_POLL_INTERVAL is nan; it must be a finite number of at least 0.01.",
    ),
    (
        {"LATER_HEARTBEAT_INTERVAL": float("inf")},
        "later.E001",
        "LATER_HEARTBEAT_INTERVAL is inf; it must be a finite number",
    ),
    ({"LATER_POLL_INTERVAL": "1"}, "later.E001", "LATER_POLL_INTERVAL is '1'"),
    (
        {"LATER_CANCEL_GRACE": -1},
        "later.E001",
        "LATER_CANCEL_GRACE is -1; it must be a finite number of at least 0.0.",
    ),
]

BACKEND = "later_django.backend.LaterBackend"

OPTIONS: list[tuple[dict[str, Any], str]] = [
    ({"lease_seconds": 0}, "OPTIONS['lease_seconds'] is 0; it must be a number of seconds"),
    ({"namespace": "a b"}, "OPTIONS['namespace'] is 'a b'; it must be 1-100 characters"),
    ({"backoff": "linear"}, "OPTIONS['backoff'] is 'linear'; it must be one of exponential"),
    ({"max_attempts": 0}, "OPTIONS['max_attempts'] is 0; it must be a whole number >= 1."),
    ({"topics": {"orders": 0}}, "'orders'"),
    (
        {"topics": {"events": {"partitions": 4, "log_compact": "yes"}}},
        "OPTIONS['topics']['events']['log_compact'] is 'yes'; it must be True",
    ),
    (
        {"topics": {"events": {"partitions": 4, "log_retention": -1}}},
        "OPTIONS['topics']['events']['log_retention'] is -1; it must be a number of seconds",
    ),
    ({"lease_sconds": 30}, "lease_sconds"),
]


@pytest.mark.parametrize(("settings", "check", "message"), SETTINGS)
def test_a_bad_later_setting_is_a_system_check_error(nothing_lost, settings, check, message):
    with override_settings(**settings):
        found = [m.msg for m in check_later_settings() if m.id == check]
    assert any(message in msg for msg in found), found


@pytest.mark.parametrize(("options", "message"), OPTIONS)
def test_bad_backend_options_are_error_e002_and_refuse_enqueue(nothing_lost, options, message):
    tasks_setting = {"default": {"BACKEND": BACKEND, "OPTIONS": {"namespace": "x", **options}}}
    with override_settings(TASKS=tasks_setting):
        found = [m.msg for m in check_tasks() if m.id == "later.E002"]
        assert any(message in msg for msg in found), found
        with pytest.raises(LaterError) as raised:
            tasks.record.enqueue("k", 1)
    assert message in str(raised.value)


# -- worker flags -----------------------------------------------------------------------------

FLAGS: list[tuple[list[str], str]] = [
    (["--concurrency", "0"], "argument --concurrency: '0' is not a whole number >= 1"),
    (["--concurrency", "eight"], "argument --concurrency: 'eight' is not a whole number >= 1"),
    (["--max-jobs", "-3"], "argument --max-jobs: '-3' is not a whole number >= 1"),
    (
        ["--shutdown-timeout", "nan"],
        "argument --shutdown-timeout: 'nan' is not a finite number of seconds >= 0",
    ),
    (
        ["--queue", "nope"],
        "Queue 'nope' is not configured for backend 'default'; its QUEUES are default, "
        "emails, slow.",
    ),
    (["--backend", "nope"], "Task backend 'nope' is not in settings.TASKS; its aliases are"),
]


@pytest.mark.parametrize(("flags", "message"), FLAGS, ids=[" ".join(f) for f, _ in FLAGS])
def test_a_bad_worker_flag_stops_the_worker_before_it_claims(nothing_lost, flags, message):
    with pytest.raises(CommandError) as raised:
        call_command("later_worker", "--burst", *flags)
    assert message in str(raised.value)


# -- dashboard URLs and cursors ---------------------------------------------------------------

SCRIPT = "<script>x</script>"
IMAGE = "<img src=x onerror=alert(1)>"  # no "/": it must fit in one path segment

PAGES: list[tuple[str, Callable[[], str], int]] = [
    ("an unknown stage", lambda: reverse("admin:later_dashboard_jobs", args=["bogus"]), 404),
    (
        "a forged cursor",
        lambda: reverse("admin:later_dashboard_jobs", args=["enqueued"]) + f"?after={SCRIPT}",
        400,
    ),
    (
        "a cursor past 64 bits",
        lambda: (
            reverse("admin:later_dashboard_jobs", args=["enqueued"])
            + f"?after=01jzzzzzzzzzzzzzzzzzzzzzzz.{2**70}"
        ),
        400,
    ),
    ("an unknown job", lambda: reverse("admin:later_dashboard_job", args=[IMAGE]), 404),
    ("an unknown topic", lambda: reverse("admin:later_dashboard_topic", args=[IMAGE]), 404),
]


@pytest.mark.parametrize(("what", "url", "status"), PAGES, ids=[p[0] for p in PAGES])
def test_a_bad_dashboard_url_answers_an_escaped_error_page(
    nothing_lost,
    operator_client,  # noqa: F811
    what,
    url,
    status,
):
    response = operator_client.get(url())
    assert response.status_code == status
    assert SCRIPT.encode() not in response.content
    assert IMAGE.encode() not in response.content


# -- stored bytes -----------------------------------------------------------------------------


def test_a_job_whose_stored_bytes_are_corrupt_reads_back_with_the_reason():
    result = tasks.record.enqueue("k", 1)
    StorageValue.objects.filter(key=job_key(result.id)).update(value=b"\xc1\xff")
    before = held()
    result.refresh()
    [error] = result.errors
    assert "cannot be decoded (FormatError)" in error.traceback
    assert held() == before


def test_list_schedules_marks_a_corrupt_schedule_and_keeps_the_rest():
    schedule("good", "0 3 * * *", tasks.record, "k", 1)
    schedule("bad", "0 4 * * *", tasks.record, "k", 2)
    Schedule.objects.filter(identifier="bad").update(payload=b"\xc1\xff")
    found = {info.identifier: info for info in list_schedules()}
    assert found["good"].error is None
    assert "cannot be decoded" in (found["bad"].error or "")
    assert Schedule.objects.count() == 2
