"""Build Django ``TaskResult`` objects from a job's record and index row.

The row and record come from the engine (``engine/reads.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils.module_loading import import_string

from .engine.reads import load_record
from .exceptions import TaskUnavailable
from .models import JobIndexRow
from .records import JobRecord, from_micros
from .states import STATUS, Stage
from .tasks_api import Task, TaskError, TaskResult, new_result

if TYPE_CHECKING:
    from .options import BackendOptions


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
    # A record's arguments were normalised by the enqueue's check and come back from
    # msgpack as they went in: TaskResult's own normalisation would only repeat it.
    result: TaskResult = new_result(
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
