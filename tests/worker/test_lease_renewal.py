"""A lease shorter than three heartbeat intervals is renewed often enough all the same."""

import pytest

from later_django.tasks_api import TaskResultStatus
from tests import tasks
from tests.conftest import wait_for
from tests.models import Execution
from tests.topics import tasks as ordered_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

LEASE = "3"
HEARTBEAT = "5"  # the default LATER_HEARTBEAT_INTERVAL, longer than the lease


def test_jobs_longer_than_a_short_lease_run_once_with_a_second_worker_waiting(start_worker):
    plain = tasks.records_start_and_end.enqueue("renewed", 5)
    ordered = ordered_tasks.timed_step.using(partition_key="renewed").enqueue("renewed", 0, 5)
    env = {"LATER_TEST_LEASE_SECONDS": LEASE, "LATER_TEST_HEARTBEAT_INTERVAL": HEARTBEAT}
    first = start_worker("--concurrency", "2", **env)
    second = start_worker("--concurrency", "2", **env)

    def finished() -> bool:
        plain.refresh()
        ordered.refresh()
        return plain.is_finished and ordered.is_finished

    wait_for(finished, timeout=60)
    output = first.output() + second.output()
    assert plain.status == TaskResultStatus.SUCCESSFUL, output
    assert ordered.status == TaskResultStatus.SUCCESSFUL, output
    # Renewed only every 5 s, both leases lapsed after 3 s and the idle worker ran
    # each job a second time, beside the first run.
    assert list(Execution.objects.filter(kind="renewed").values_list("value", flat=True)) == [
        "start",
        "end",
    ]
    assert Execution.objects.filter(kind="start:renewed").count() == 1
    assert Execution.objects.filter(kind="end:renewed").count() == 1
    assert len(plain.worker_ids) == 1
    assert len(ordered.worker_ids) == 1
    assert "later.W002" in output  # each worker's start-up checks say why renewal is faster
