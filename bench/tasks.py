from django.tasks import task


@task
def noop():
    return None
