"""Tasks the dashboard tests enqueue; the worker subprocess imports them by path."""

from django.tasks import task


@task
def explode(message):
    raise ValueError(message)


@task
def echo(value):
    return value
