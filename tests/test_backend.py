"""LaterBackend and LaterTask: feature flags, Later options through @task, task validation."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

import later_django
from later_django.backend import LaterBackend, LaterTask
from later_django.backoff import Fixed, Immediate
from later_django.exceptions import InvalidArgument
from later_django.tasks_api import InvalidTask, default_task_backend, task, task_backends
from tests import tasks


def test_the_backend_supports_every_django_tasks_feature():
    backend = task_backends["default"]
    assert isinstance(backend, LaterBackend)
    assert backend.supports_defer
    assert backend.supports_priority
    assert backend.supports_async_task
    assert backend.supports_get_result


def test_task_decorator_builds_a_later_task_with_its_options():
    assert isinstance(tasks.always_fails, LaterTask)
    assert tasks.always_fails.max_attempts == 3
    assert tasks.always_fails.backoff == "immediate"
    assert tasks.too_slow_python.timeout == 0.5
    assert tasks.add.max_attempts is None
    assert tasks.add.timeout is None


def test_a_task_without_backoff_uses_the_alias_default_policy():
    backend = default_task_backend
    assert backend.backoff_for(tasks.add) == backend.later.backoff
    assert backend.backoff_for(tasks.always_fails) == Immediate()
    assert backend.backoff_for(tasks.fails_then_succeeds) == Fixed(seconds=0.2)
    assert backend.backoff_for(tasks.fails_with_given_error) is tasks.retry_only_value_errors


def test_using_keeps_later_options_and_accepts_a_timedelta_run_after():
    before = timezone.now()
    delayed = tasks.always_fails.using(run_after=timedelta(minutes=5), priority=7)
    assert isinstance(delayed, LaterTask)
    assert delayed.max_attempts == 3
    assert delayed.priority == 7
    assert delayed.run_after is not None
    assert (
        before + timedelta(minutes=5) <= delayed.run_after <= timezone.now() + timedelta(minutes=5)
    )


def test_using_accepts_an_aware_datetime_run_after():
    when = datetime(2030, 1, 1, tzinfo=UTC)
    assert tasks.add.using(run_after=when).run_after == when


TIMEOUT_RULE = "it must be a number of seconds > 0 and at most 3155760000 (100 years)."


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            {"max_attempts": 0},
            "max_attempts is 0; it must be a whole number >= 1 (it counts the first attempt).",
        ),
        (
            {"max_attempts": "3"},
            "max_attempts is '3'; it must be a whole number >= 1 (it counts the first attempt).",
        ),
        ({"timeout": 0}, f"timeout is 0; {TIMEOUT_RULE}"),
        ({"timeout": "5"}, f"timeout is '5'; {TIMEOUT_RULE}"),
        ({"timeout": float("nan")}, f"timeout is nan; {TIMEOUT_RULE}"),
        ({"timeout": float("inf")}, f"timeout is inf; {TIMEOUT_RULE}"),
        ({"atomic": "yes"}, "atomic is 'yes'; it must be True or False."),
        ({"atomic": 1}, "atomic is 1; it must be True or False."),
        (
            {"backoff": "never"},
            "backoff is 'never'; it must be one of exponential, exponential_jitter, fixed, "
            "immediate or a callable.",
        ),
        (
            {"backoff": {"policy": "fixed", "seconds": -1}},
            "Backoff seconds is -1; it must be a finite number of seconds >= 0.",
        ),
    ],
)
def test_a_bad_later_option_on_a_task_is_refused_when_it_is_defined(options, message):
    with pytest.raises(InvalidTask) as raised:
        later_django.task(**options)(tasks.add.func)
    assert str(raised.value) == message


def test_an_async_task_cannot_be_atomic():
    with pytest.raises(InvalidTask) as raised:
        later_django.task(atomic=True)(tasks.async_add.func)
    assert str(raised.value) == (
        "atomic=True needs a plain function, and 'tests.tasks.async_add' is async: its "
        "database calls would run in other threads, outside the job's transaction."
    )


def test_an_unknown_decorator_option_is_refused():
    with pytest.raises(TypeError, match="unexpected keyword argument 'retries'"):
        later_django.task(retries=3)(tasks.add.func)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        (
            {"priority": 101},
            "priority must be a whole number between -100 and 100. It is 101; higher runs first.",
        ),
        (
            {"priority": -101},
            "priority must be a whole number between -100 and 100. It is -101; higher runs first.",
        ),
        (
            {"priority": 1.5},
            "priority must be a whole number between -100 and 100. It is 1.5; higher runs first.",
        ),
        (
            {"priority": "high"},
            "priority must be a whole number between -100 and 100. It is 'high'; higher runs "
            "first.",
        ),
        (
            {"queue_name": "reports"},
            "Queue 'reports' is not valid for backend. queue_name is 'reports'; it must be one "
            "of the QUEUES of task backend 'default': default, emails, slow.",
        ),
        (
            {"run_after": datetime(2030, 1, 1, 9, 30)},
            "run_after must be an aware datetime. It is datetime.datetime(2030, 1, 1, 9, 30), a "
            "naive datetime; with USE_TZ = True use an aware datetime or a timedelta from now.",
        ),
        (
            {"run_after": 60},
            "run_after is 60; it must be a datetime or a timedelta from now.",
        ),
    ],
)
def test_bad_enqueue_options_are_refused_naming_the_value(changes, message):
    with pytest.raises(InvalidTask) as raised:
        tasks.add.using(**changes)
    assert str(raised.value) == message


def test_the_highest_and_lowest_priorities_are_accepted():
    assert tasks.add.using(priority=100).priority == 100
    assert tasks.add.using(priority=-100).priority == -100


def test_a_task_function_must_be_module_level():
    def inner():
        return None

    with pytest.raises(InvalidTask, match=r"^Task function must be defined at a module level\.$"):
        task(inner)


@override_settings(
    TASKS={
        "default": {
            "BACKEND": "later_django.backend.LaterBackend",
            "OPTIONS": {"namespace": "no spaces allowed"},
        }
    }
)
def test_enqueue_on_a_misconfigured_backend_raises_its_configuration_error():
    with pytest.raises(InvalidArgument) as raised:
        tasks.add.enqueue(1, 2)
    assert str(raised.value).startswith(
        "OPTIONS['namespace'] is 'no spaces allowed'; it must be 1-100 characters"
    )
