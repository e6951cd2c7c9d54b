"""Tasks the dashboard tests enqueue; the worker subprocess imports them by path."""

from later_django import task


@task
def explode(message):
    raise ValueError(message)


@task
def echo(value):
    return value


@task
def keep_quiet(secret, *, token=None):
    """Succeeds without returning or raising anything derived from its arguments."""
    return "done"


@task
def fail_quietly(secret, *, token=None):
    raise ValueError("no luck")


@task(topic="orders")
def ordered(key, secret):
    return "done"
