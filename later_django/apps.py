from django.apps import AppConfig


class LaterConfig(AppConfig):
    name = "later_django"
    label = "later"
    verbose_name = "Later"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The system checks; tasks_api also registers the backport's checks and receivers.
        from . import checks, tasks_api  # noqa: F401
        from .topics import receivers  # noqa: F401  (registers topics after migrate)
