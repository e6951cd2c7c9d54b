"""Test settings with a second database, ``other``, for where Later's tables go.

Read from the environment, so a test can start ``manage.py`` with any mix:

* ``LATER_TEST_OTHER_DATABASE_URL``: the second database (required);
* ``LATER_TEST_LATER_DATABASE``: the alias the Later backend keeps its jobs on
  (``default`` unless set);
* ``LATER_TEST_ROUTER``: ``1`` adds ``later_django.routers.LaterRouter``.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES, TASKS, env

_other = env.db("LATER_TEST_OTHER_DATABASE_URL")
if _other["ENGINE"].endswith("mysql"):
    import pymysql

    # Django's MySQL backend asks for mysqlclient 2.2.1 or newer; PyMySQL speaks its API.
    pymysql.version_info = (2, 2, 1, "final", 0)
    pymysql.install_as_MySQLdb()
elif _other["ENGINE"].endswith("sqlite3"):
    _other["OPTIONS"] = {"transaction_mode": "IMMEDIATE"}
DATABASES = {**DATABASES, "other": _other}

TASKS = {
    **TASKS,
    "default": {
        **TASKS["default"],
        "OPTIONS": {
            **TASKS["default"]["OPTIONS"],
            "database": os.environ.get("LATER_TEST_LATER_DATABASE", "default"),
        },
    },
}

if os.environ.get("LATER_TEST_ROUTER") == "1":
    DATABASE_ROUTERS = ["later_django.routers.LaterRouter"]
