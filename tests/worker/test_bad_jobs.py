"""Jobs that cannot run (task gone, stored bytes corrupt) fail; the worker carries on."""

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from later_django.engine.claiming import claim
from later_django.engine.outcomes import SUCCESS, Outcome
from later_django.exceptions import TaskUnavailable
from later_django.jobs import get_job
from later_django.models import JobIndexRow, StorageValue
from later_django.records import ErrorEntry, JobRecord
from later_django.results import UnavailableTask
from later_django.tasks_api import TaskResultDoesNotExist, TaskResultStatus, default_task_backend
from later_django.worker.config import WorkerConfig
from later_django.worker.runner import Worker
from tests import tasks
from tests.models import Execution
from tests.topics import tasks as topic_tasks

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def rewrite_record(job_id: str, **changes) -> None:
    row = StorageValue.objects.get(key=f"job:{job_id}")
    record = JobRecord.decode(bytes(row.value), job_id=job_id)
    for name, value in changes.items():
        setattr(record, name, value)
    row.value = record.encode()
    row.save()


def good_jobs(start: int) -> list[str]:
    calls = [(("good", str(i)), {}) for i in range(start, start + 3)]
    return [r.id for r in tasks.record.enqueue_many(calls)]


def assert_good_jobs_ran(ids: list[str]) -> None:
    ran = Execution.objects.filter(kind="good").values_list("value", flat=True)
    assert sorted(ran, key=int) == [str(i) for i in range(len(ids))]
    assert {JobIndexRow.objects.get(job_id=i).stage for i in ids} == {"success"}


def rewrite_task_path(job_id: str, task_path: str) -> None:
    rewrite_record(job_id, task_path=task_path)
    JobIndexRow.objects.filter(job_id=job_id).update(task_path=task_path)


WHY = "TaskUnavailable: Task {!r} "
GONE = [
    (
        "tests.tasks.renamed_since",
        'cannot be imported (Module "tests.tasks" does not define a "renamed_since" '
        "attribute/class); it must name a function decorated with django.tasks.task.",
    ),
    (
        "tests.removed_module.task",
        "cannot be imported (No module named 'tests.removed_module'); it must name a function "
        "decorated with django.tasks.task.",
    ),
    (
        "tests.fails_on_import.task",
        "cannot be imported (RuntimeError: this module cannot be imported); it must name a "
        "function decorated with django.tasks.task.",
    ),
    (
        "tests.tasks.retry_only_value_errors",
        "is a function, not a Task; decorate it with django.tasks.task.",
    ),
    (
        "os.system",
        "is a builtin_function_or_method, not a Task; decorate it with django.tasks.task.",
    ),
    (
        "builtins.print",
        "is a builtin_function_or_method, not a Task; decorate it with django.tasks.task.",
    ),
    (
        "tests.tasks.add_under_another_name",
        "is the Task 'tests.tasks.add' under another name; a job must name its task by the "
        "path it is defined at.",
    ),
]


def test_jobs_whose_path_is_not_where_a_task_is_defined_fail_without_running(run_burst, tmp_path):
    proof = tmp_path / "ran"
    ids = good_jobs(0)
    broken = []
    for task_path, _ in GONE:
        # Arguments that would leave a trace if whatever the path names were called.
        job_id = tasks.sleep_only.enqueue(f"touch {proof}").id
        rewrite_task_path(job_id, task_path)
        broken.append(job_id)
    ids += good_jobs(3)
    worker = run_burst("--concurrency", "1")

    assert_good_jobs_ran(ids)
    assert not proof.exists()
    for job_id, (task_path, why) in zip(broken, GONE, strict=True):
        assert JobIndexRow.objects.get(job_id=job_id).stage == "failed"
        [error] = get_job(job_id, namespace="tests").errors
        assert error.exception_class_path == "later_django.exceptions.TaskUnavailable"
        assert error.traceback.endswith(WHY.format(task_path) + why + "\n")
        # The result stays readable through Django, its task standing in for the missing one.
        result = default_task_backend.get_result(job_id)
        assert result.status == TaskResultStatus.FAILED
        assert [e.exception_class for e in result.errors] == [TaskUnavailable]
        assert isinstance(result.task, UnavailableTask)
        assert result.task.module_path == task_path
        assert result.task.reason == f"Task {task_path!r} " + why
        with pytest.raises(TaskUnavailable, match=f"^{re.escape(result.task.reason)}$"):
            result.task.call(f"touch {proof}")
        assert not proof.exists()
    assert f" failed={len(GONE)} " in worker.output()


CORRUPT = [
    (b"\xc1\xc1\xc1", "(FormatError)"),
    (b"\x01\x02", "(ExtraData: unpack(b) received extra data.)"),
    (b"\x93\x01\x02\x03", "(TypeError: expected a map, got list)"),
    (b"\x81\xa2id\x01", "(TypeError: JobRecord.__init__() missing"),
]


def test_jobs_whose_stored_bytes_cannot_be_decoded_fail_with_the_decode_error(run_burst):
    ids = good_jobs(0)
    broken = []
    for stored, _ in CORRUPT:
        job_id = tasks.record.enqueue("bad", "never").id
        StorageValue.objects.filter(key=f"job:{job_id}").update(value=stored)
        broken.append(job_id)
    ids += good_jobs(3)
    worker = run_burst("--concurrency", "1")

    assert_good_jobs_ran(ids)
    for job_id, (stored, cause) in zip(broken, CORRUPT, strict=True):
        row = JobIndexRow.objects.get(job_id=job_id)
        assert row.stage == "failed"
        assert row.date_expire is not None
        # The stand-in record that now holds the error expires with its index row.
        kept = StorageValue.objects.get(key=f"job:{job_id}")
        assert kept.date_expire == row.date_expire
        record = JobRecord.decode(bytes(kept.value), job_id=job_id)
        assert record.original_bytes == stored
        assert record.decode_error.startswith(f"Stored record of job {job_id!r} cannot be decoded")

        result = default_task_backend.get_result(job_id)
        assert result.status == TaskResultStatus.FAILED
        assert result.task.module_path == "tests.tasks.record"
        assert [a.worker_id for a in record.attempts] == result.worker_ids
        assert len(result.worker_ids) == 1
        [error] = result.errors
        assert error.exception_class_path == "later_django.exceptions.PayloadDecodeError"
        last = error.traceback.rstrip("\n").splitlines()[-1]
        assert last.startswith(
            f"later_django.exceptions.PayloadDecodeError: Stored record of job {job_id!r} "
            f"cannot be decoded {cause}"
        )
        assert last.endswith("it must be a msgpack map written by later_django.")
    assert f" failed={len(CORRUPT)} " in worker.output()
    assert "Traceback" not in worker.output()
    admin = Client()
    admin.force_login(User.objects.create_superuser("admin", password="pw"))
    page = admin.get(reverse("admin:later_dashboard_job", args=[broken[0]])).content.decode()
    assert "This job's stored record cannot be decoded: Stored record of job" in page
    assert "<code>later_django.exceptions.PayloadDecodeError</code>" in page


def test_a_queued_job_whose_record_was_deleted_fails_without_stopping_the_worker(run_burst):
    ids = good_jobs(0)
    broken = tasks.record.enqueue("bad", "never")
    StorageValue.objects.filter(key=f"job:{broken.id}").delete()
    ids += good_jobs(3)
    worker = run_burst("--concurrency", "1")

    assert_good_jobs_ran(ids)
    assert JobIndexRow.objects.get(job_id=broken.id).stage == "failed"
    assert " failed=1 " in worker.output()
    with pytest.raises(TaskResultDoesNotExist):
        default_task_backend.get_result(broken.id)


def test_an_ordered_job_that_cannot_be_decoded_fails_and_its_partition_moves_on(run_burst):
    first = topic_tasks.step.using(partition_key="k").enqueue("k", 1)
    then = topic_tasks.step.using(partition_key="k").enqueue("k", 2)
    StorageValue.objects.filter(key=f"job:{first.id}").update(value=b"\xc1\xff")
    run_burst("--concurrency", "1")

    broken = default_task_backend.get_result(first.id)
    assert broken.status == TaskResultStatus.FAILED
    [error] = broken.errors
    assert error.exception_class_path == "later_django.exceptions.PayloadDecodeError"
    view = get_job(first.id, namespace="tests")
    assert (view.topic, view.sequence, len(view.errors)) == ("orders", 1, 1)
    assert view.decode_error is not None
    assert default_task_backend.get_result(then.id).status == TaskResultStatus.SUCCESSFUL


def test_a_job_failing_with_a_message_that_is_not_utf8_fails_and_the_worker_carries_on(run_burst):
    """The message names a file whose name is not UTF-8 (``\\xff``), as ``os.listdir``
    returns it: with a lone surrogate, which a record cannot hold as it is."""
    ids = good_jobs(0)
    bad = tasks.fails_naming_a_bad_file.enqueue("bad-name")
    ids += good_jobs(3)
    worker = run_burst("--concurrency", "2", timeout=30)

    assert_good_jobs_ran(ids)
    assert "could not be stored" not in worker.output()  # escaped as it was recorded
    result = default_task_backend.get_result(bad.id)
    assert result.status == TaskResultStatus.FAILED
    [error] = result.errors
    assert error.exception_class_path == "builtins.FileNotFoundError"
    assert "FileNotFoundError: no such file: report-\\udcff.csv" in error.traceback


def test_an_outcome_whose_record_cannot_be_stored_neither_wedges_the_writer_nor_holds_others():
    """However a record came to hold what cannot be encoded, the writer stores the batch:
    free text escaped, or else the outcome without its record."""
    jobs = [tasks.record.enqueue("writer", str(n)) for n in range(3)]
    worker = Worker(WorkerConfig(install_signal_handlers=False))
    items = []
    for _ in jobs:
        items += claim("tests", worker.id, queues=None, free=1, lease_seconds=30, using="default")
    good, escaped, unstorable = sorted(
        items, key=lambda item: [j.id for j in jobs].index(item.job_id)
    )
    now = timezone.now()
    for item in items:
        item.load()
    escaped.record.errors.append(ErrorEntry("builtins.OSError", "bad name: \udcff", 0, worker.id))
    unstorable.record.return_value = {1, 2}  # past the return value's check, somehow
    with worker.lock:
        for item in items:
            worker.outcomes.emit(Outcome(item.job_id, item.epoch, SUCCESS, item.record, now))

    worker.outcomes.collect()  # mends the two, and leaves the batch for the next call
    worker.outcomes.collect()

    assert worker.outcomes.unstored == 0
    assert {JobIndexRow.objects.get(job_id=j.id).stage for j in jobs} == {"success"}
    view = get_job(escaped.job_id, namespace="tests")
    assert view.record.errors[-1].traceback == "bad name: \\udcff"
    # Stored without its record: the record stays as it was claimed.
    view = get_job(unstorable.job_id, namespace="tests")
    assert view.record.return_value is None
    assert get_job(good.job_id, namespace="tests").record.stage == "success"
