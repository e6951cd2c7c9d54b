"""Tasks the upgrade project enqueues before the upgrade and runs after it."""

from django.tasks import task

# The retry waits this long, so the worker that makes the first attempt has
# exited (it claims one job) long before the retry falls due.
RETRY_SECONDS = 5


@task
def plain(label):
    return label


@task(max_attempts=2, backoff={"policy": "fixed", "seconds": RETRY_SECONDS}, takes_context=True)
def fails_once(context, label):
    if context.attempt == 1:
        raise RuntimeError(f"{label}: the first attempt fails")
    return f"{label} on attempt {context.attempt}"


@task(topic="orders")
def ordered(label):
    return label
