"""Schedules declared in TASKS[alias]["OPTIONS"]["schedules"]: checked, then synced."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

import later_django
from later_django.exceptions import InvalidArgument, SerializationError
from later_django.models import Schedule
from later_django.schedules.definitions import declared
from later_django.schedules.ticking import sync_declared
from later_django.tasks_api import default_task_backend
from tests import tasks

pytestmark = pytest.mark.django_db

PREFIX = "TASKS['default']['OPTIONS']['schedules']"


def declaring(schedules):
    default = settings.TASKS["default"]
    return override_settings(
        TASKS={"default": {**default, "OPTIONS": {**default["OPTIONS"], "schedules": schedules}}}
    )


def refusal(schedules, exception=InvalidArgument) -> str:
    with declaring(schedules), pytest.raises(exception) as caught:
        declared(default_task_backend.later)
    return str(caught.value)


NOOP = {"cron": "@daily", "task": "tests.tasks.noop"}


def test_a_declaration_that_is_not_a_dict_is_refused():
    assert refusal({"x": "@daily"}) == (
        f"{PREFIX}['x'] is '@daily'; it must be a dict with 'cron' and 'task' and optionally "
        "'args', 'kwargs' and 'sequential'."
    )


def test_an_unknown_or_missing_key_is_refused():
    assert refusal({"x": {**NOOP, "every": 5}}) == (
        f"{PREFIX}['x'] has unknown key 'every'; allowed keys are cron, task, args, kwargs, "
        "sequential."
    )
    assert refusal({"x": {"task": "tests.tasks.noop"}}) == (
        f"{PREFIX}['x'] has no 'cron'; it is required."
    )


def test_each_bad_part_is_named_by_its_setting():
    assert refusal({"x": {**NOOP, "cron": "0 0 * * 8"}}).startswith(
        f"{PREFIX}['x']['cron'] is '0 0 * * 8'; its day of week field '8' is not valid ("
    )
    assert refusal({"x": {**NOOP, "task": "tests.tasks.gone"}}).startswith(
        f"{PREFIX}['x']['task'] is 'tests.tasks.gone'; Task 'tests.tasks.gone' cannot be imported"
    )
    assert refusal({"x": {**NOOP, "sequential": 1}}) == (
        f"{PREFIX}['x']['sequential'] is 1; it must be True or False."
    )
    assert refusal({"x": {**NOOP, "args": "abc"}}) == (
        f"{PREFIX}['x']['args'] is 'abc'; it must be a list."
    )
    assert refusal({"x": {**NOOP, "kwargs": {1: 2}}}) == (
        f"{PREFIX}['x']['kwargs'] is {{1: 2}}; it must be a dict of str keys."
    )
    assert refusal({"bad id": NOOP}) == (
        f"The identifier of {PREFIX}['bad id'] is 'bad id'; it must be 1-100 characters of "
        "letters, digits, '_', '.', ':' or '-'."
    )


def test_unserialisable_declared_arguments_are_refused():
    spec = {"cron": "@daily", "task": "tests.tasks.record", "args": ["k", {1, 2}]}
    assert refusal({"x": spec}, SerializationError) == (
        f"{PREFIX}['x']: Argument #1 (positional) of task 'tests.tasks.record' is {{1, 2}} of "
        "type set; task arguments must be JSON values: None, bool, int, float, str, and lists "
        "and dicts (with str keys) of them."
    )


def test_an_invalid_declaration_is_a_system_check_error():
    with declaring({"x": {**NOOP, "cron": "0 0 31 2 *"}}):
        [error] = [e for e in default_task_backend.check() if e.id == "later.E010"]
    assert error.msg == (
        f"{PREFIX}['x']['cron'] is '0 0 31 2 *', which never matches a real date (such as 31 "
        "February); change its day-of-month or month field."
    )
    assert error.hint == "See docs/workflows.md for the form of a declared schedule."
    with declaring({"x": NOOP}):
        assert [e for e in default_task_backend.check() if e.id == "later.E010"] == []


def test_sync_stores_declarations_and_keeps_their_next_run_time():
    spec = {**NOOP, "task": "tests.tasks.record", "args": ["k"], "kwargs": {"value": 1}}
    with declaring({"nightly": spec}):
        sync_declared(default_task_backend)
        [info] = later_django.list_schedules()
        assert (info.identifier, info.origin, info.args, info.kwargs) == (
            "nightly",
            "settings",
            ["k"],
            {"value": 1},
        )
        earlier = timezone.now() - timedelta(minutes=5)
        Schedule.objects.update(next_run_at=earlier)
        sync_declared(default_task_backend)
        assert later_django.list_schedules()[0].next_run_at == earlier


def test_sync_drops_declarations_removed_from_settings_but_not_code_schedules():
    later_django.schedule("from-code", "@daily", tasks.noop)
    with declaring({"a": NOOP, "b": NOOP}):
        sync_declared(default_task_backend)
    with declaring({"b": NOOP}):
        sync_declared(default_task_backend)
    assert [(s.identifier, s.origin) for s in later_django.list_schedules()] == [
        ("b", "settings"),
        ("from-code", "code"),
    ]


def test_a_declaration_takes_over_a_code_schedule_of_the_same_identifier():
    later_django.schedule("shared", "@hourly", tasks.noop)
    with declaring({"shared": NOOP}):
        sync_declared(default_task_backend)
    [info] = later_django.list_schedules()
    assert (info.cron, info.origin) == ("@daily", "settings")
