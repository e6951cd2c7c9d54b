import pytest
from django.db import transaction

from later_django.exceptions import InvalidArgument, UnknownTopic
from later_django.log import append, append_many, read
from later_django.models import LogRecord
from later_django.topics.routing import partition_for_key

pytestmark = pytest.mark.django_db(transaction=True)


def test_records_of_one_key_get_consecutive_offsets_in_its_partition():
    placed = [append("events", "customer-7", f"event {i}".encode()) for i in range(5)]
    partition = partition_for_key("customer-7", 4)
    assert placed == [(partition, i) for i in range(5)]
    records = read("events", partition)
    assert [r.payload for r in records] == [f"event {i}".encode() for i in range(5)]
    assert {r.key for r in records} == {"customer-7"}


def test_read_starts_at_the_offset_and_honours_the_limit():
    append_many("events", [("k", str(i).encode()) for i in range(10)])
    partition = partition_for_key("k", 4)
    assert [r.offset for r in read("events", partition, 4, limit=3)] == [4, 5, 6]


def test_an_append_rolled_back_with_the_callers_transaction_leaves_nothing():
    def append_then_fail() -> None:
        with transaction.atomic():
            append("events", "k", b"never")
            raise RuntimeError("roll back")

    with pytest.raises(RuntimeError):
        append_then_fail()
    assert not LogRecord.objects.exists()
    assert append("events", "k", b"first")[1] == 0


def test_keyless_records_are_spread_over_the_partitions():
    partitions = {append("events", None, b"x")[0] for _ in range(60)}
    assert len(partitions) > 1


def test_bad_input_is_refused_with_the_value_named():
    with pytest.raises(UnknownTopic, match="Topic 'nope' is not declared"):
        append("nope", "k", b"x")
    with pytest.raises(InvalidArgument, match=r"payload #0 is a str; it must be bytes"):
        append("events", "k", "text")
    with pytest.raises(InvalidArgument, match=r"partition_key is ''"):
        append("events", "", b"x")
    with pytest.raises(
        InvalidArgument, match=r"partition is 4; topic 'events' has partitions 0 to 3"
    ):
        read("events", 4)
    with pytest.raises(InvalidArgument, match=r"limit is 0; it must be a whole number from 1 to"):
        read("events", 0, limit=0)
    assert not LogRecord.objects.exists()


def test_a_backend_alias_that_is_not_in_tasks_is_refused_with_the_aliases():
    with pytest.raises(
        InvalidArgument, match=r"^backend is 'nope', which is not a TASKS alias; the aliases are"
    ):
        append("events", None, b"x", backend="nope")


def test_a_backend_of_another_kind_is_refused(settings):
    settings.TASKS = {
        **settings.TASKS,
        "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
    }
    with pytest.raises(
        InvalidArgument,
        match=r"^backend is 'immediate', whose BACKEND is "
        r"'django.tasks.backends.immediate.ImmediateBackend'; the retained log needs",
    ):
        read("events", 0, backend="immediate")


def test_new_options_are_read_when_the_settings_change(settings):
    settings.TASKS = {
        "default": {
            **settings.TASKS["default"],
            "OPTIONS": {**settings.TASKS["default"]["OPTIONS"], "topics": {"other": 2}},
        }
    }
    with pytest.raises(UnknownTopic):
        append("events", None, b"x")
