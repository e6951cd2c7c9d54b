"""Settings for the benchmarks: ``DATABASE_URL`` names a throwaway database."""

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
        "OPTIONS": {"namespace": "bench", "topics": {"bench": 16}},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
LATER_POLL_INTERVAL = env.float("LATER_POLL_INTERVAL", default=1.0)
