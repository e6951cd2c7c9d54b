from django.apps import AppConfig


class TestsConfig(AppConfig):
    name = "tests"
    default_auto_field = "django.db.models.BigAutoField"
