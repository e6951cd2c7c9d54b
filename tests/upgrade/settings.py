"""Settings of the upgrade project; ``LATER_UPGRADE_DATABASE_URL`` names its database."""

import os

import environ

SECRET_KEY = "later-django-upgrade"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "later_django"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_database = environ.Env.db_url_config(os.environ["LATER_UPGRADE_DATABASE_URL"])
if _database["ENGINE"].endswith("sqlite3"):
    _database["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
DATABASES = {"default": _database}

LATER_POLL_INTERVAL = 0.05
LATER_HEARTBEAT_INTERVAL = 0.5

TASKS = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "OPTIONS": {
            "namespace": "upgrade",
            "lease_seconds": 5,
            "topics": {"orders": 4, "events": 2},
        },
    }
}
