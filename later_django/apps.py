from django.apps import AppConfig


class LaterConfig(AppConfig):
    name = "later_django"
    label = "later"
    verbose_name = "Later"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # The system checks; tasks_api also registers the backport's checks and receivers.
        # The backend, the engine and their libraries load with the app rather than at a
        # process's first enqueue, which would otherwise wait about 50 ms for them (the
        # first request of each web process, the first call of a script).
        from . import backend, checks, tasks_api  # noqa: F401
        from .topics import receivers  # noqa: F401  (registers topics after migrate)
