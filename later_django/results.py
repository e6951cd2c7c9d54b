"""Build Django ``TaskResult`` objects from a job's record and index row."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.db.models import Q
from django.utils import timezone
from django.utils.module_loading import import_string

from .exceptions import PayloadDecodeError, TaskUnavailable
from .models import JobIndexRow, StorageValue
from .records import ErrorEntry, JobRecord, from_micros, job_key, to_micros
from .states import STATUS, Stage
from .tasks_api import Task, TaskError, TaskResult

if TYPE_CHECKING:
    from .options import BackendOptions


def live(now: Any) -> Q:
    return Q(date_expire__isnull=True) | Q(date_expire__gt=now)


def load_record(namespace: str, job_id: str, *, using: str) -> tuple[JobIndexRow, JobRecord] | None:
    """The index row and decoded record of an unexpired job, or None.

    A record that cannot be decoded comes back as a ``stand_in`` with the
    decode error as its newest error, so a broken job can still be shown,
    cancelled and deleted.
    """
    now = timezone.now()
    row = (
        JobIndexRow.objects.using(using)
        .filter(live(now), namespace=namespace, job_id=job_id)
        .first()
    )
    if row is None:
        return None
    raw = (
        StorageValue.objects.using(using)
        .filter(live(now), namespace=namespace, key=job_key(job_id))
        .values_list("value", flat=True)
        .first()
    )
    if raw is None:
        return None
    try:
        return row, JobRecord.decode(bytes(raw), job_id=job_id)
    except PayloadDecodeError as e:
        record = stand_in(row, bytes(raw), e)
        record.errors.append(
            ErrorEntry(
                exception_class_path=f"{PayloadDecodeError.__module__}.PayloadDecodeError",
                traceback=f"{PayloadDecodeError.__module__}.PayloadDecodeError: {e}\n",
                at=to_micros(row.transitioned_at) or 0,
            )
        )
        return row, record


def stand_in(row: JobIndexRow, raw: bytes, error: PayloadDecodeError) -> JobRecord:
    """A record rebuilt from a job's index row, for a job whose stored record cannot be decoded.

    It has the task, queue, priority, times and partition place the index row
    holds; its arguments are unknown (empty here), its ``decode_error`` says
    why, and ``original_bytes`` keeps what was stored, for whoever investigates.
    """
    return JobRecord(
        id=row.job_id,
        task_path=row.task_path,
        args=[],
        kwargs={},
        queue_name=row.queue_name,
        priority=row.priority,
        backend="",
        enqueued_at=to_micros(row.enqueued_at) or 0,
        max_attempts=max(row.attempts, 1),
        finished_at=to_micros(row.finished_at),
        stage=row.stage,
        parent_id=row.parent_job_id,
        topic=row.topic,
        partition=row.partition,
        sequence=row.sequence,
        decode_error=str(error),
        original_bytes=raw,
    )


def resolve_task(task_path: str, *, exact: bool = True) -> Task:
    """Import the Task named by ``task_path``, or raise TaskUnavailable naming the path.

    A stored job names its task by where it is defined (``Task.module_path``). With
    ``exact``, anything else found there is refused, a Task re-exported under another
    name included, so a row can only ever run the task it was enqueued for.
    """
    try:
        task = import_string(task_path)
    except Exception as e:  # any failure of the import: the task is not there to run
        cause = str(e) if isinstance(e, ImportError) else f"{type(e).__name__}: {e}"
        raise TaskUnavailable(
            f"Task {task_path!r} cannot be imported ({cause}); it must name a function "
            "decorated with django.tasks.task."
        ) from e
    if not isinstance(task, Task):
        raise TaskUnavailable(
            f"Task {task_path!r} is a {type(task).__name__}, not a Task; decorate it with "
            "django.tasks.task."
        )
    if exact and task.module_path != task_path:
        raise TaskUnavailable(
            f"Task {task_path!r} is the Task {task.module_path!r} under another name; a job "
            "must name its task by the path it is defined at."
        )
    return task


@dataclass(frozen=True, slots=True, kw_only=True)
class UnavailableTask(Task):
    """Stands for the Task of a stored job whose path no longer leads to one.

    A job's result stays readable after its task is renamed or removed: the
    TaskResult carries this in ``task``, with the stored path, queue and priority;
    ``reason`` says why the Task is missing, and calling it raises that reason.
    """

    reason: str = ""

    def __post_init__(self) -> None:
        # It describes a stored job rather than a new one: its queue or priority may
        # no longer be accepted by the backend, and nothing will be enqueued with it.
        pass


def unavailable_task(later: BackendOptions, record: JobRecord, reason: str) -> UnavailableTask:
    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise TaskUnavailable(reason)

    module, _, name = record.task_path.rpartition(".")
    unavailable.__module__ = module
    unavailable.__name__ = unavailable.__qualname__ = name
    return UnavailableTask(
        func=unavailable,
        priority=record.priority,
        backend=later.alias,
        queue_name=record.queue_name,
        run_after=from_micros(record.run_after),
        reason=reason,
    )


def build_result(
    later: BackendOptions, row: JobIndexRow, record: JobRecord, task: Task | None = None
) -> TaskResult:
    if task is None:
        try:
            task = resolve_task(record.task_path)
        except TaskUnavailable as e:
            task = unavailable_task(later, record, str(e))
    run_after = from_micros(record.run_after)
    if (task.queue_name, task.priority, task.run_after) != (
        record.queue_name,
        record.priority,
        run_after,
    ):  # copying a Task re-validates it: skip that for a job enqueued with its defaults
        task = task.using(
            queue_name=record.queue_name, priority=record.priority, run_after=run_after
        )
    attempts = record.attempts
    result: TaskResult = TaskResult(
        task=task,
        id=record.id,
        status=STATUS[row.stage],
        enqueued_at=from_micros(record.enqueued_at),
        started_at=from_micros(attempts[0].started_at) if attempts else None,
        last_attempted_at=from_micros(attempts[-1].started_at) if attempts else None,
        finished_at=from_micros(record.finished_at),
        args=record.args,
        kwargs=record.kwargs,
        backend=later.alias,
        errors=[
            TaskError(exception_class_path=e.exception_class_path, traceback=e.traceback)
            for e in record.errors
        ],
        worker_ids=record.worker_ids,
    )
    if row.stage == Stage.SUCCESS:
        object.__setattr__(result, "_return_value", record.return_value)
    return result


def load_result(later: BackendOptions, job_id: str) -> TaskResult | None:
    found = load_record(later.namespace, job_id, using=later.database)
    if found is None:
        return None
    return build_result(later, *found)
