"""USE_TZ = False: jobs enqueue, wait, run and read back in naive local time, as Django's do."""

from datetime import UTC, datetime, timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

import later_django
from later_django.models import JobIndexRow, Schedule
from later_django.schedules.ticking import run_due
from later_django.tasks_api import InvalidTask, TaskResultStatus, default_task_backend
from tests import tasks
from tests.schedules import tasks as schedule_tasks
from tests.topics import tasks as topic_tasks
from tests.worker.in_process import run_burst_in_process

# A zone far from UTC, and not by whole hours, so a naive time taken as UTC is hours off.
LOCAL_ZONE = "Asia/Kathmandu"

pytestmark = pytest.mark.django_db(transaction=True)


def near(value: datetime, expected: datetime, seconds: float = 60) -> bool:
    return abs(value - expected) < timedelta(seconds=seconds)


@pytest.fixture
def without_time_zones():
    with override_settings(USE_TZ=False, TIME_ZONE=LOCAL_ZONE):
        yield


@pytest.mark.usefixtures("without_time_zones")
def test_with_use_tz_off_jobs_enqueue_wait_run_and_read_back_in_local_time():
    now = timezone.now()
    assert timezone.is_naive(now)
    plain = tasks.add.enqueue(1, 2)
    past_naive = tasks.add.using(run_after=now - timedelta(minutes=1)).enqueue(3, 4)
    past_aware = tasks.add.using(run_after=datetime.now(UTC) - timedelta(minutes=1)).enqueue(5, 6)
    later_naive = tasks.add.using(run_after=now + timedelta(hours=1)).enqueue(7, 8)
    later_delta = tasks.add.using(run_after=timedelta(hours=1)).enqueue(9, 10)
    bulk = tasks.add.enqueue_many([((i, i), {}) for i in range(3)])
    delayed_bulk = tasks.add.using(run_after=now + timedelta(minutes=30)).enqueue_many(
        [((i, 1), {}) for i in range(2)]
    )
    due = [plain, past_naive, past_aware, *bulk]
    waiting = [later_naive, later_delta, *delayed_bulk]

    assert all(timezone.is_naive(r.enqueued_at) and near(r.enqueued_at, now) for r in due)
    stages = dict(JobIndexRow.objects.values_list("job_id", "stage"))
    assert [stages[r.id] for r in due] == ["enqueued"] * len(due)
    assert [stages[r.id] for r in waiting] == ["delayed"] * len(waiting)
    # The index holds the local time Django's own DateTimeFields hold with USE_TZ off.
    run_at = JobIndexRow.objects.get(job_id=later_naive.id).run_at
    assert timezone.is_naive(run_at)
    assert near(run_at, now + timedelta(hours=1), seconds=1)

    run_burst_in_process(concurrency=2)

    for result, value in zip(due, [3, 7, 11, 0, 2, 4], strict=True):
        fetched = default_task_backend.get_result(result.id)
        assert (fetched.status, fetched.return_value) == (TaskResultStatus.SUCCESSFUL, value)
        for moment in (fetched.enqueued_at, fetched.started_at, fetched.finished_at):
            assert timezone.is_naive(moment)
            assert near(moment, timezone.now())
        result.refresh()
        assert result.status == TaskResultStatus.SUCCESSFUL
    for result in waiting:
        fetched = tasks.add.get_result(result.id)
        assert fetched.status == TaskResultStatus.READY
        assert timezone.is_naive(fetched.task.run_after)
    assert tasks.add.get_result(later_naive.id).task.run_after == pytest.approx(
        now + timedelta(hours=1), abs=timedelta(microseconds=1)
    )


@pytest.mark.usefixtures("without_time_zones")
def test_with_use_tz_off_a_failed_attempt_is_retried_after_its_delay_in_local_time():
    result = tasks.fails_and_retries_in_a_minute.enqueue("local-retry")
    run_burst_in_process()

    row = JobIndexRow.objects.get(job_id=result.id)
    assert row.stage == "requeued"
    assert near(row.run_at, timezone.now() + timedelta(seconds=60), seconds=15)
    result.refresh()
    assert result.status == TaskResultStatus.READY
    assert [e.exception_class_path for e in result.errors] == ["builtins.ValueError"]


@pytest.mark.usefixtures("without_time_zones")
def test_with_use_tz_off_continuations_ordered_jobs_and_schedules_run():
    parent = tasks.add.enqueue(1, 1)
    child = tasks.add.using(after=parent).enqueue(2, 2)
    ordered = topic_tasks.step.using(partition_key="k").enqueue("k", 1)
    before = timezone.now()
    later_django.schedule("minutely", "* * * * *", schedule_tasks.tick, "k")
    [info] = later_django.list_schedules()
    assert timezone.is_naive(info.next_run_at)
    assert before < info.next_run_at <= before + timedelta(minutes=1)
    Schedule.objects.update(next_run_at=timezone.now() - timedelta(seconds=1))
    before = timezone.now()
    [fired] = run_due(default_task_backend)
    [info] = later_django.list_schedules()
    assert before < info.next_run_at <= timezone.now() + timedelta(minutes=1)

    run_burst_in_process(concurrency=2)

    for job_id in (parent.id, child.id, ordered.id, fired):
        assert default_task_backend.get_result(job_id).status == TaskResultStatus.SUCCESSFUL


def test_with_use_tz_on_a_naive_run_after_is_still_refused():
    with pytest.raises(InvalidTask, match=r"^run_after must be an aware datetime\. "):
        tasks.add.using(run_after=datetime(2030, 1, 1))
