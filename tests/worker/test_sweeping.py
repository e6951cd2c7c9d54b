"""Retention and sweeping: finished jobs expire, then go in bounded batches; WAL checkpoints."""

import logging
import os
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.utils import timezone

from later_django.models import JobIndexRow, StorageValue
from later_django.storage import Storage
from later_django.tasks_api import TaskResultDoesNotExist, TaskResultStatus, default_task_backend
from later_django.worker.config import WorkerConfig
from later_django.worker.maintenance import sweep_jobs_index
from later_django.worker.runner import Worker
from later_django.worker.services import Services
from later_django.worker.wakeup import use_wal
from tests import tasks
from tests.conftest import wait_for
from tests.db_state import index_stage_counts, stage_counts
from tests.worker.in_process import worker_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]

NS = "tests"
SHORT_RETENTION = {
    "default": {
        "BACKEND": "later_django.backend.LaterBackend",
        "QUEUES": ["default", "emails", "slow"],
        "OPTIONS": {"namespace": NS, "lease_seconds": 2, "retention_seconds": 1},
    }
}


def finished_jobs(count: int, *, expired: bool = True) -> list[str]:
    """Jobs in stage success whose retention ended a minute ago (or ends in an hour)."""
    ids = [r.id for r in tasks.add.enqueue_many([((i, i), {}) for i in range(count)])]
    expire = timezone.now() + (timedelta(minutes=-1) if expired else timedelta(hours=1))
    JobIndexRow.objects.filter(job_id__in=ids).update(stage="success", date_expire=expire)
    StorageValue.objects.filter(key__in=[f"job:{i}" for i in ids]).update(date_expire=expire)
    return ids


@override_settings(TASKS=SHORT_RETENTION, LATER_SWEEP_INTERVAL=0.2)
def test_finished_jobs_disappear_after_their_retention_and_their_rows_are_swept(caplog):
    caplog.set_level(logging.INFO, logger="later_django.worker.services")
    ok = [r.id for r in tasks.add.enqueue_many([((i, i), {}) for i in range(5)])]
    failed = tasks.always_fails.enqueue("gone soon").id
    with worker_thread():
        wait_for(lambda: JobIndexRow.objects.filter(stage__in=["success", "failed"]).count() == 6)
        # Still readable during the retention...
        assert default_task_backend.get_result(failed).status == TaskResultStatus.FAILED
        assert default_task_backend.get_result(ok[0]).return_value == 0
        finished_at = time.monotonic()
        # ...and gone once it ends (retention 1 s, sweeps every 0.2 s).
        wait_for(lambda: not JobIndexRow.objects.exists() and not StorageValue.objects.exists())
        assert time.monotonic() - finished_at > 0.5
    for job_id in [*ok, failed]:
        with pytest.raises(TaskResultDoesNotExist):
            default_task_backend.get_result(job_id)
    assert stage_counts(NS) == {}
    assert "swept expired rows namespace=tests removed=" in caplog.text


def test_an_expired_job_is_invisible_before_it_is_swept():
    [job_id] = finished_jobs(1)
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(job_id)
    assert JobIndexRow.objects.filter(job_id=job_id).exists()


def test_a_sweep_deletes_at_most_its_batch_and_only_expired_rows():
    finished_jobs(25)
    kept = finished_jobs(2, expired=False)
    storage = Storage(NS)

    assert [sweep_jobs_index(NS, limit=10, using="default") for _ in range(4)] == [10, 10, 5, 0]
    assert [storage.sweep_expired(10) for _ in range(4)] == [10, 10, 5, 0]

    assert set(JobIndexRow.objects.values_list("job_id", flat=True)) == set(kept)
    assert StorageValue.objects.count() == 2
    assert stage_counts(NS) == index_stage_counts(NS) == {"success": 2}


@override_settings(LATER_SWEEP_BATCH=10)
def test_one_sweep_turn_works_through_a_backlog_in_batches(caplog):
    caplog.set_level(logging.INFO, logger="later_django.worker.services")
    finished_jobs(25)
    Services(Worker(WorkerConfig(install_signal_handlers=False))).sweep()

    assert not JobIndexRow.objects.exists()
    assert not StorageValue.objects.exists()
    assert "swept expired rows namespace=tests removed=50" in caplog.text


def test_a_sweep_checkpoints_and_truncates_the_sqlite_wal(vendor):
    if vendor != "sqlite":
        pytest.skip("SQLite only")
    use_wal("default")
    wal = f"{connection.settings_dict['NAME']}-wal"
    finished_jobs(50)
    assert os.path.getsize(wal) > 0

    Services(Worker(WorkerConfig(install_signal_handlers=False))).sweep()

    assert os.path.getsize(wal) == 0
    assert not JobIndexRow.objects.exists()
