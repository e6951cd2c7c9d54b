"""Test settings plus a schedule declared in OPTIONS, for worker subprocesses."""

import os

from tests.settings import *  # noqa: F403
from tests.settings import TASKS

TASKS = {
    "default": {
        **TASKS["default"],
        "OPTIONS": {
            **TASKS["default"]["OPTIONS"],
            "schedules": {
                "declared-tick": {
                    "cron": os.environ.get("LATER_TEST_SCHEDULE_CRON", "* * * * * *"),
                    "task": "tests.schedules.tasks.tick",
                    "args": ["declared"],
                    "kwargs": {"label": "from settings"},
                },
            },
        },
    },
}
