"""System checks for the ``LATER_*`` settings (ids ``later.E0xx``).

Checks of a backend alias's ``OPTIONS`` run through the backend's own
``check()``, which Django's tasks framework calls.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string

from .conf import SETTINGS


@checks.register("later")
def check_later_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    errors: list[checks.CheckMessage] = []
    for setting in SETTINGS.values():
        if not hasattr(settings, setting.name):
            continue
        value = getattr(settings, setting.name)
        kinds = setting.kind if isinstance(setting.kind, tuple) else (setting.kind,)
        ok = isinstance(value, kinds) and (bool in kinds or not isinstance(value, bool))
        # inf and nan are floats too; an interval of either never comes round.
        if ok and isinstance(value, float):
            ok = math.isfinite(value)
        # An empty token would let in any request that sends an empty one.
        if ok and isinstance(value, str):
            ok = bool(value)
        if ok and value is not None and setting.minimum is not None:
            ok = value >= setting.minimum
        if ok and setting.name in CALLABLE_SETTINGS and value is not None:
            errors += _check_callable(setting.name, value, setting.help)
            continue
        if not ok:
            allowed = _allowed(kinds)
            errors.append(
                checks.Error(
                    f"{setting.name} is {value!r}; it must be {allowed}"
                    + (f" of at least {setting.minimum}" if setting.minimum is not None else "")
                    + ".",
                    hint=setting.help,
                    id="later.E001",
                )
            )
    return errors


CALLABLE_SETTINGS = frozenset({"LATER_REDACT"})


def _check_callable(name: str, value: str, help_text: str) -> list[checks.CheckMessage]:
    """later.E001 unless ``value`` is the dotted path of something importable and callable."""
    try:
        found = import_string(value)
    except Exception as e:  # noqa: BLE001  (a module can raise anything while it imports)
        why = f"importing it fails ({type(e).__name__}: {e})"
    else:
        if callable(found):
            return []
        why = f"it names a {type(found).__name__}, which is not callable"
    return [
        checks.Error(
            f"{name} is {value!r}; it must be the dotted path of an importable callable, "
            f"but {why}.",
            hint=help_text,
            id="later.E001",
        )
    ]


def _allowed(kinds: tuple[type, ...]) -> str:
    """What a setting of these types may be, in words."""
    if float in kinds:
        return "None or a finite number" if type(None) in kinds else "a finite number"
    if str in kinds:
        return "None or a non-empty string" if type(None) in kinds else "a non-empty string"
    return " or ".join(k.__name__ for k in kinds)


def check_renewal(alias: str, lease_seconds: float) -> list[checks.CheckMessage]:
    """Warn (later.W002) when leases are renewed more often than LATER_HEARTBEAT_INTERVAL says.

    Called by the backend's own check, which knows the alias's ``lease_seconds``.
    """
    from .conf import RENEWALS_PER_LEASE, renewal_interval

    heartbeat = getattr(
        settings, "LATER_HEARTBEAT_INTERVAL", SETTINGS["LATER_HEARTBEAT_INTERVAL"].default
    )
    if (
        isinstance(heartbeat, bool)
        or not isinstance(heartbeat, int | float)
        or not math.isfinite(heartbeat)
    ):
        return []  # later.E001 names it
    renewal = renewal_interval(heartbeat, lease_seconds)
    if not renewal < heartbeat:
        return []
    return [
        checks.Warning(
            f"LATER_HEARTBEAT_INTERVAL is {heartbeat!r}, more than a third of "
            f"TASKS[{alias!r}]['OPTIONS']['lease_seconds'] ({lease_seconds:g}); workers of "
            f"{alias!r} renew their leases every {renewal:g} seconds instead.",
            hint=(
                f"Set LATER_HEARTBEAT_INTERVAL to at most {renewal:g}, or lease_seconds to at "
                f"least {heartbeat * RENEWALS_PER_LEASE:g}, so both say the same."
            ),
            id="later.W002",
        )
    ]


def check_postgres_driver(alias: str, driver: str) -> list[checks.CheckMessage]:
    """Error (later.E005) when Django reaches PostgreSQL through a driver other than psycopg 3.

    ``driver`` is the name of the module Django's PostgreSQL backend uses
    (``connection.Database.__name__``): ``"psycopg"`` or ``"psycopg2"``. The
    engine's wake-ups, prepared statements and error codes need psycopg 3.
    """
    if driver == "psycopg":
        return []
    return [
        checks.Error(
            f"Database {alias!r} is PostgreSQL through {driver!r}; later_django needs "
            "psycopg 3 (pip install later-django[postgres]).",
            hint="Install psycopg 3: Django's PostgreSQL backend prefers it to psycopg2 "
            "when both are installed.",
            id="later.E005",
        )
    ]
