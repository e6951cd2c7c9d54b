"""schedule(), unschedule() and list_schedules(): upsert, listing, refusals naming the part."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import transaction
from django.utils import timezone

import later_django
from later_django.exceptions import InvalidArgument, SerializationError
from later_django.models import Schedule
from tests import tasks
from tests.schedules import tasks as schedule_tasks

pytestmark = pytest.mark.django_db


def test_schedule_stores_the_call_and_its_next_run_time():
    before = timezone.now()
    info = later_django.schedule("nightly", "0 3 * * *", tasks.record, "report", value=1)
    assert (info.identifier, info.cron, info.task_path) == (
        "nightly",
        "0 3 * * *",
        "tests.tasks.record",
    )
    assert (info.args, info.kwargs, info.sequential, info.origin) == (
        ["report"],
        {"value": 1},
        False,
        "code",
    )
    assert info.next_run_at > before
    assert info.next_run_at.tzinfo is UTC
    assert (info.next_run_at.hour, info.next_run_at.minute) == (3, 0)
    assert (info.last_run_at, info.last_job_id) == (None, None)
    assert later_django.list_schedules() == [info]


def test_schedule_accepts_a_re_exported_path_and_stores_where_the_task_is_defined():
    info = later_django.schedule("alias", "@hourly", "tests.tasks.add_under_another_name", 1, 2)
    assert info.task_path == "tests.tasks.add"


def test_schedule_accepts_a_dotted_path_and_keeps_using_options():
    info = later_django.schedule("by-path", "@hourly", "tests.schedules.tasks.tick", "k")
    assert (info.task_path, info.queue_name, info.priority) == (
        "tests.schedules.tasks.tick",
        "slow",
        5,
    )
    info = later_django.schedule(
        "by-task", "@hourly", tasks.record.using(priority=7, queue_name="emails"), "k", "v"
    )
    assert (info.queue_name, info.priority) == ("emails", 7)


def test_a_task_keyword_argument_may_share_a_name_with_a_schedule_parameter():
    info = later_django.schedule("names", "@daily", tasks.record, kind="k", value="v")
    assert info.kwargs == {"kind": "k", "value": "v"}
    info = later_django.schedule("clash", "@daily", schedule_tasks.tick, "k", label="identifier")
    assert info.kwargs == {"label": "identifier"}


def test_scheduling_an_identifier_again_replaces_its_definition():
    first = later_django.schedule("report", "0 3 * * *", tasks.record, "a", "1")
    second = later_django.schedule("report", "0 3 * * *", tasks.record, "b", "2", sequential=True)
    assert (second.args, second.sequential) == (["b", "2"], True)
    assert second.next_run_at == first.next_run_at
    assert Schedule.objects.filter(identifier="report").count() == 1
    third = later_django.schedule("report", "0 4 * * *", tasks.record, "b", "2")
    assert third.next_run_at.hour == 4
    assert [s.cron for s in later_django.list_schedules()] == ["0 4 * * *"]


def test_unschedule_removes_a_schedule_and_reports_whether_there_was_one():
    later_django.schedule("gone", "@daily", tasks.noop)
    later_django.schedule("kept", "@daily", tasks.noop)
    assert later_django.unschedule("gone") is True
    assert later_django.unschedule("gone") is False
    assert [s.identifier for s in later_django.list_schedules()] == ["kept"]


def test_list_schedules_orders_by_identifier():
    for identifier in ("b", "c", "a"):
        later_django.schedule(identifier, "@daily", tasks.noop)
    assert [s.identifier for s in later_django.list_schedules()] == ["a", "b", "c"]


def test_a_schedule_rolls_back_with_the_callers_transaction():
    def schedule_then_fail():
        with transaction.atomic():
            later_django.schedule("rolled-back", "@daily", tasks.noop)
            raise RuntimeError("the caller's work failed")

    with pytest.raises(RuntimeError, match="the caller's work failed"):
        schedule_then_fail()
    assert later_django.list_schedules() == []


def refused(exception, *args, **kwargs) -> str:
    with pytest.raises(exception) as caught:
        later_django.schedule(*args, **kwargs)
    assert not Schedule.objects.exists()
    return str(caught.value)


def test_an_invalid_cron_string_is_refused_naming_the_field():
    assert refused(InvalidArgument, "bad", "0 24 * * *", tasks.noop).startswith(
        "cron is '0 24 * * *'; its hour field '24' is not valid ("
    )


def test_an_unknown_task_path_is_refused():
    message = refused(InvalidArgument, "bad", "@daily", "tests.tasks.missing")
    assert message.startswith(
        "task is 'tests.tasks.missing'; Task 'tests.tasks.missing' cannot be imported ("
    )
    assert message.endswith("it must name a function decorated with django.tasks.task.")


def test_something_other_than_a_task_is_refused():
    assert refused(InvalidArgument, "bad", "@daily", len) == (
        f"task is {len!r}; it must be a Task (a function decorated with django.tasks.task) or "
        "its dotted path."
    )


def test_unserialisable_arguments_are_refused_naming_the_argument():
    assert refused(SerializationError, "bad", "@daily", tasks.record, "k", {1, 2}) == (
        "Argument #1 (positional) of task 'tests.tasks.record' is {1, 2} of type set; task "
        "arguments must be JSON values: None, bool, int, float, str, and lists and dicts (with "
        "str keys) of them."
    )
    assert refused(SerializationError, "bad", "@daily", tasks.record, "k", value=object).startswith(
        "Argument 'value' of task 'tests.tasks.record' is <class 'object'> of type type;"
    )


def test_a_bad_identifier_is_refused():
    assert refused(InvalidArgument, "no spaces", "@daily", tasks.noop) == (
        "identifier is 'no spaces'; it must be 1-100 characters of letters, digits, '_', '.', "
        "':' or '-'."
    )


def test_a_non_boolean_sequential_flag_is_refused():
    assert refused(InvalidArgument, "bad", "@daily", tasks.noop, sequential="yes") == (
        "sequential is 'yes'; it must be True or False."
    )


def test_an_unknown_backend_alias_is_refused():
    with pytest.raises(InvalidArgument) as caught:
        later_django.list_schedules(backend="elsewhere")
    assert str(caught.value) == "backend is 'elsewhere', which is not a TASKS alias."
    with pytest.raises(InvalidArgument) as caught:
        later_django.unschedule("x", backend="elsewhere")
    assert str(caught.value) == "backend is 'elsewhere', which is not a TASKS alias."


def test_next_run_time_of_a_seconds_schedule_is_within_a_second():
    now = datetime.now(UTC)
    info = later_django.schedule("fast", "* * * * * *", tasks.noop)
    assert now < info.next_run_at <= now + timedelta(seconds=1)
