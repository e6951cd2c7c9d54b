from django.apps import AppConfig


class LaterConfig(AppConfig):
    name = "later_django"
    label = "later"
    verbose_name = "Later"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks  # noqa: F401  (registers the system checks)
        from .topics import receivers  # noqa: F401  (registers topics after migrate)
