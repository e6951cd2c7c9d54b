"""Cron strings: validation naming the bad field, and evaluation across daylight saving."""

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from django.test import override_settings

from later_django.exceptions import InvalidArgument
from later_django.schedules.cron import check_cron, next_run

PARIS = ZoneInfo("Europe/Paris")
ALLOWED = (
    "5 fields (minute hour day-of-month month day-of-week), 6 with a leading seconds field, "
    "or one of @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly"
)


def runs(cron: str, start: datetime, count: int) -> list[str]:
    """The next ``count`` run times after ``start``, as Paris wall times with their offsets."""
    found, moment = [], start
    for _ in range(count):
        moment = next_run(cron, moment, PARIS)
        assert moment.tzinfo is UTC
        found.append(moment.astimezone(PARIS).isoformat())
    return found


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("61 * * * *", "its minute field '61' is not valid"),
        ("0 25 * * *", "its hour field '25' is not valid"),
        ("0 0 * 13 *", "its month field '13' is not valid"),
        ("0 0 * * FUNDAY", "its day of week field 'FUNDAY' is not valid"),
        ("*/0 * * * *", "its minute field '*/0' is not valid"),
        ("75 * * * * *", "its second field '75' is not valid"),
        ("H * * * *", "its minute field 'H' is not valid"),
    ],
)
def test_an_invalid_field_is_named(cron, message):
    with pytest.raises(InvalidArgument) as caught:
        check_cron(cron)
    assert str(caught.value).startswith(f"cron is {cron!r}; {message} (")


@pytest.mark.parametrize("cron", ["* * * *", "* * * * * * *", ""])
def test_a_wrong_number_of_fields_is_refused(cron):
    with pytest.raises(InvalidArgument) as caught:
        check_cron(cron)
    count = len(cron.split())
    assert str(caught.value) == f"cron is {cron!r}, which has {count} fields; it must be {ALLOWED}."


def test_a_cron_string_that_never_matches_a_date_is_refused():
    with pytest.raises(InvalidArgument) as caught:
        check_cron("0 0 31 2 *")
    assert str(caught.value) == (
        "cron is '0 0 31 2 *', which never matches a real date (such as 31 February); change "
        "its day-of-month or month field."
    )


def test_an_unknown_nickname_or_a_non_string_is_refused():
    with pytest.raises(InvalidArgument) as caught:
        check_cron("@reboot")
    assert str(caught.value) == f"cron is '@reboot'; it must be {ALLOWED}."
    with pytest.raises(InvalidArgument) as caught:
        check_cron(5)
    assert str(caught.value) == f"cron is 5; it must be a string of {ALLOWED}."


def test_whitespace_and_nickname_case_are_normalised():
    assert check_cron("  0   3 *  * 1-5 ") == "0 3 * * 1-5"
    assert check_cron("@Daily") == "@daily"


def test_six_fields_lead_with_seconds():
    start = datetime(2025, 1, 1, 0, 0, 0, 500_000, tzinfo=UTC)
    assert next_run("*/15 * * * * *", start, UTC) == datetime(2025, 1, 1, 0, 0, 15, tzinfo=UTC)
    assert next_run("30 0 * * * *", start, UTC) == datetime(2025, 1, 1, 0, 0, 30, tzinfo=UTC)


def test_the_next_run_is_strictly_after_the_given_time():
    start = datetime(2025, 1, 1, 3, 0, tzinfo=UTC)
    assert next_run("0 3 * * *", start, UTC) == datetime(2025, 1, 2, 3, 0, tzinfo=UTC)


@override_settings(TIME_ZONE="Europe/Paris")
def test_cron_is_evaluated_in_settings_time_zone():
    start = datetime(2025, 1, 1, 12, 0, tzinfo=UTC)
    assert next_run("0 3 * * *", start) == datetime(2025, 1, 2, 2, 0, tzinfo=UTC)


def test_a_wall_time_skipped_by_spring_forward_runs_at_the_transition():
    assert runs("30 2 * * *", datetime(2025, 3, 28, 12, tzinfo=PARIS), 3) == [
        "2025-03-29T02:30:00+01:00",
        "2025-03-30T03:00:00+02:00",
        "2025-03-31T02:30:00+02:00",
    ]


def test_a_wall_time_repeated_by_fall_back_runs_once():
    assert runs("30 2 * * *", datetime(2025, 10, 24, 12, tzinfo=PARIS), 3) == [
        "2025-10-25T02:30:00+02:00",
        "2025-10-26T02:30:00+02:00",
        "2025-10-27T02:30:00+01:00",
    ]


def test_an_hourly_schedule_runs_every_real_hour_through_fall_back():
    assert runs("0 * * * *", datetime(2025, 10, 26, 1, 30, tzinfo=PARIS), 4) == [
        "2025-10-26T02:00:00+02:00",
        "2025-10-26T02:00:00+01:00",
        "2025-10-26T03:00:00+01:00",
        "2025-10-26T04:00:00+01:00",
    ]


def test_an_hourly_schedule_has_no_run_in_the_hour_spring_forward_removes():
    assert runs("0 * * * *", datetime(2025, 3, 30, 0, 30, tzinfo=PARIS), 3) == [
        "2025-03-30T01:00:00+01:00",
        "2025-03-30T03:00:00+02:00",
        "2025-03-30T04:00:00+02:00",
    ]
