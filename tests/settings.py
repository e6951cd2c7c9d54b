"""Settings for the test suite; ``DATABASE_URL`` picks SQLite or PostgreSQL.

Worker subprocesses started by the tests import these same settings with
``LATER_TEST_DATABASE_NAME`` set, so they open the test database the suite
created rather than the configured one.
"""

import os
import uuid
from pathlib import Path

import environ

ROOT = Path(__file__).resolve().parent.parent
env = environ.Env()

SECRET_KEY = "later-django-tests"
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "later_django",
    "tests",
]

MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]

ROOT_URLCONF = "tests.urls"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

STATIC_URL = "static/"
# Users made by the dashboard's tests hash their passwords; the default hasher's
# deliberate slowness cost each such test 0.4 s (Django's advice for test settings).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

_database = env.db("DATABASE_URL", default=f"sqlite:///{ROOT / '.test-db' / 'test.sqlite3'}")
_run = os.environ.setdefault("LATER_TEST_RUN", uuid.uuid4().hex[:8])
if _database["ENGINE"].endswith("sqlite3"):
    _database["TEST"] = {"NAME": str(Path(_database["NAME"]).with_name(f"test_{_run}.sqlite3"))}
    _database["OPTIONS"] = {
        "timeout": float(os.environ.get("LATER_TEST_SQLITE_TIMEOUT", "30")),
        "transaction_mode": "IMMEDIATE",
    }
else:
    _database["TEST"] = {"NAME": f"test_later_{_run}"}
if os.environ.get("LATER_TEST_DATABASE_NAME"):
    _database["NAME"] = os.environ["LATER_TEST_DATABASE_NAME"]
DATABASES = {"default": _database}

# Worker subprocesses of a test may be given other values through the environment.
LATER_POLL_INTERVAL = float(os.environ.get("LATER_TEST_POLL_INTERVAL", "0.05"))
LATER_HEARTBEAT_INTERVAL = float(os.environ.get("LATER_TEST_HEARTBEAT_INTERVAL", "0.5"))
LATER_SWEEP_INTERVAL = float(os.environ.get("LATER_TEST_SWEEP_INTERVAL", "60"))
LATER_CANCEL_GRACE = float(os.environ.get("LATER_TEST_CANCEL_GRACE", "10"))

TASKS = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "QUEUES": ["default", "emails", "slow"],
        "OPTIONS": {
            "namespace": "tests",
            "lease_seconds": float(os.environ.get("LATER_TEST_LEASE_SECONDS", "2")),
            "topics": {
                # A worker test bounds the history of "orders" through the environment.
                "orders": (
                    {"partitions": 8, "keep_last": int(os.environ["LATER_TEST_KEEP_LAST"])}
                    if os.environ.get("LATER_TEST_KEEP_LAST")
                    else 8
                ),
                # A worker test has workers keep the log of "events" through the environment.
                "events": (
                    {"partitions": 4, "log_compact": True, "log_retention": 3600}
                    if os.environ.get("LATER_TEST_LOG_UPKEEP")
                    else 4
                ),
            },
        },
    },
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(process)d %(levelname)s %(name)s %(message)s"}
    },
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "later_django": {
            "handlers": ["stderr"],
            "level": os.environ.get("LATER_TEST_LOG_LEVEL", "WARNING"),
        },
    },
}
