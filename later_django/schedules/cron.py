"""Cron strings, parsed and evaluated by croniter in the project's time zone.

Five fields (minute hour day-of-month month day-of-week), six with a leading
seconds field as in Later, or one of croniter's nicknames (``@hourly``…).
Daylight saving follows classic cron (Vixie cron): a time skipped when clocks
go forward runs at the transition; when clocks go back, a job pinned to a wall
time runs once, and only jobs whose seconds, minute or hour field starts with
``*`` (they run every hour or more often) also run in the repeated hour.
"""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo

from croniter import croniter
from croniter.croniter import CroniterError

from ..exceptions import InvalidArgument

FIVE = ("minute", "hour", "day of month", "month", "day of week")
SIX = ("second", *FIVE)
NICKNAMES = ("@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly")
ALLOWED = (
    "5 fields (minute hour day-of-month month day-of-week), 6 with a leading seconds field, "
    f"or one of {', '.join(NICKNAMES)}"
)
# A fixed-time job skips at most the few matches of one repeated hour.
MAX_SKIPS = 10_000


def project_zone() -> tzinfo:
    """The zone of ``settings.TIME_ZONE`` (UTC when unset), read live."""
    from django.conf import settings

    return ZoneInfo(settings.TIME_ZONE or "UTC")


def check_cron(cron: object, *, field: str = "cron") -> str:
    """Return ``cron`` normalised, or raise InvalidArgument naming the bad field."""
    if not isinstance(cron, str):
        raise InvalidArgument(f"{field} is {cron!r}; it must be a string of {ALLOWED}.")
    text = " ".join(cron.split())
    fields = text.split(" ")
    if text.startswith("@"):
        if text.lower() not in NICKNAMES:
            raise InvalidArgument(f"{field} is {cron!r}; it must be {ALLOWED}.")
        return text.lower()
    if len(fields) not in (5, 6):
        raise InvalidArgument(
            f"{field} is {cron!r}, which has {len(fields) if text else 0} fields; it must be "
            f"{ALLOWED}."
        )
    names = FIVE if len(fields) == 5 else SIX
    for index, (name, value) in enumerate(zip(names, fields, strict=True)):
        probe = ["*"] * len(fields)
        probe[index] = value
        try:
            croniter(" ".join(probe), second_at_beginning=len(fields) == 6)
        except (CroniterError, ValueError, KeyError) as e:
            raise InvalidArgument(
                f"{field} is {cron!r}; its {name} field {value!r} is not valid ({e})."
            ) from e
    try:
        _iterator(text, datetime.now(UTC)).get_next(datetime)
    except (CroniterError, ValueError) as e:
        raise InvalidArgument(
            f"{field} is {cron!r}, which never matches a real date (such as 31 February); "
            "change its day-of-month or month field."
        ) from e
    return text


def _iterator(cron: str, start: datetime) -> croniter:
    return croniter(cron, start, second_at_beginning=len(cron.split(" ")) == 6)


def _every_hour_or_more(cron: str) -> bool:
    if cron.startswith("@"):
        return cron == "@hourly"
    fields = cron.split(" ")
    wall = fields[:3] if len(fields) == 6 else fields[:2]
    return any(f.startswith("*") for f in wall)


def _repeated_wall_time(moment: datetime) -> bool:
    """Whether ``moment`` is the second occurrence of its wall time (clocks went back)."""
    first = moment.replace(fold=0).utcoffset()
    second = moment.replace(fold=1).utcoffset()
    return first != second and moment.utcoffset() == second


def next_run(cron: str, after: datetime, zone: tzinfo | None = None) -> datetime:
    """The first time strictly after ``after`` that ``cron`` matches, as an aware UTC datetime."""
    zone = zone or project_zone()
    iterator = _iterator(cron, after.astimezone(zone))
    repeat_ok = _every_hour_or_more(cron)
    for _ in range(MAX_SKIPS):
        candidate = iterator.get_next(datetime).astimezone(zone)
        if repeat_ok or not _repeated_wall_time(candidate):
            return candidate.astimezone(UTC)
    raise InvalidArgument(f"cron {cron!r} found no time after {after.isoformat()}.")
