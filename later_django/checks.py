"""System checks for the ``LATER_*`` settings (ids ``later.E0xx``).

Checks of a backend alias's ``OPTIONS`` run through the backend's own
``check()``, which Django's tasks framework calls.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core import checks

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
        if ok and value is not None and setting.minimum is not None:
            ok = value >= setting.minimum
        if not ok:
            allowed = " or ".join(k.__name__ for k in kinds).replace("NoneType", "None")
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
