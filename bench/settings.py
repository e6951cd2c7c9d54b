"""Settings for the benchmarks: ``DATABASE_URL`` names a throwaway database.

``LATER_BENCH_LEASE_SECONDS`` and ``LATER_HEARTBEAT_INTERVAL`` let a script
run its workers with a shorter lease than the backend's default of 30 s.
"""

import environ

env = environ.Env()
SECRET_KEY = "later-django-bench"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django.contrib.contenttypes", "django.contrib.auth", "later_django"]
DATABASES = {"default": env.db("DATABASE_URL")}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
TASKS = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "OPTIONS": {
            "namespace": "bench",
            "topics": {"bench": 16},
            "lease_seconds": env.float("LATER_BENCH_LEASE_SECONDS", default=30.0),
        },
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LATER_POLL_INTERVAL = env.float("LATER_POLL_INTERVAL", default=1.0)
LATER_HEARTBEAT_INTERVAL = env.float("LATER_HEARTBEAT_INTERVAL", default=5.0)
