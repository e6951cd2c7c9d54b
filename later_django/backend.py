"""The django.tasks backend, ``"BACKEND": "later_django.backend.LaterBackend"`` in ``TASKS``."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from inspect import iscoroutinefunction
from typing import Any

from django.conf import settings
from django.core import checks
from django.db import connections
from django.utils import timezone

from . import backoff as backoff_module
from . import options as options_module
from .db import django_time
from .engine.continuations import insert_continuations
from .engine.enqueue import STREAMED_BATCH, NewJob, insert_batches, insert_jobs
from .exceptions import InvalidArgument, InvalidCall
from .options import validate_name
from .records import JobRecord, NewRecords, check_arguments, new_job_id, to_micros
from .results import UnavailableTask, load_result
from .states import STATUS, Stage
from .tasks_api import (
    TASK_MAX_PRIORITY,
    TASK_MIN_PRIORITY,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    new_result,
    task_enqueued,
)
from .topics.enqueueing import insert_with_partitions, route_fields
from .topics.routing import check_key


@dataclass(frozen=True, slots=True, kw_only=True)
class LaterTask(Task):
    """A Django Task with Later's options: retries, backoff, timeout, topic, atomic and parent.

    ``max_attempts`` counts the first attempt; ``None`` takes the backend
    alias's default, as does ``backoff``. ``topic`` marks an ordered task whose
    enqueues must name a ``partition_key``; ``atomic`` runs each attempt in one
    transaction with its outcome (docs/exactly-once.md); ``after`` (set through
    ``using``) is the id of the job this one continues.
    """

    max_attempts: int | None = None
    backoff: Any = None
    timeout: float | None = None
    topic: str | None = None
    atomic: bool = False
    partition_key: str | None = None
    after: str | None = None

    def using(
        self,
        *,
        priority: int | None = None,
        queue_name: str | None = None,
        run_after: datetime | timedelta | None = None,
        backend: str | None = None,
        partition_key: str | None = None,
        after: TaskResult | str | None = None,
    ) -> LaterTask:
        """Return a copy with changed defaults; ``run_after`` may be a timedelta from now.

        ``partition_key`` picks the partition of an ordered (topic) task;
        ``after`` makes the job a continuation of a parent job (a TaskResult
        or a job id): it runs only once the parent has succeeded.
        """
        if isinstance(run_after, timedelta):
            run_after = timezone.now() + run_after
        changes: dict[str, Any] = {}
        if priority is not None:
            changes["priority"] = priority
        if queue_name is not None:
            changes["queue_name"] = queue_name
        if run_after is not None:
            changes["run_after"] = run_after
        if backend is not None:
            changes["backend"] = backend
        if partition_key is not None:
            changes["partition_key"] = partition_key
        if after is not None:
            changes["after"] = after.id if isinstance(after, TaskResult) else after
        return replace(self, **changes)

    def enqueue_many(
        self, calls: Iterable[tuple[Sequence[Any], dict[str, Any]]]
    ) -> list[TaskResult]:
        """Enqueue many calls of this task in one transaction; each call is ``(args, kwargs)``."""
        backend = self.get_backend()
        assert isinstance(backend, LaterBackend)
        return backend.enqueue_many(self, calls)


def check_call(number: int, call: Any) -> tuple[Sequence[Any], Mapping[str, Any]]:
    """Return the ``(args, kwargs)`` of ``calls[number]``, or raise InvalidCall naming it.

    ``task.enqueue(*args, **kwargs)`` can only pass a tuple and a dict of str keys; a
    bulk call is held to the same shape, so a string is not split into letters and a
    bad key is refused now rather than when the job runs.
    """
    where = f"enqueue_many: calls[{number}]"
    if not isinstance(call, tuple) or len(call) != 2:
        raise InvalidCall(f"{where} is {call!r}; it must be an (args, kwargs) tuple.")
    args, kwargs = call
    if not isinstance(args, list | tuple):
        raise InvalidCall(
            f"{where} has args {args!r} of type {type(args).__name__}; args must be a list or "
            "tuple (use () for none)."
        )
    if not isinstance(kwargs, Mapping):
        raise InvalidCall(
            f"{where} has kwargs {kwargs!r} of type {type(kwargs).__name__}; kwargs must be a "
            "dict (use {} for none)."
        )
    for key in kwargs:
        if not isinstance(key, str):
            raise InvalidCall(
                f"{where} has the keyword {key!r} of type {type(key).__name__}; keyword names "
                "must be str."
            )
    return args, kwargs


# From this many jobs in a call, what their records share is packed once: setting
# that up costs about 18 µs, and saves about 2 µs a record (an enqueue() of one job
# would pay several times what packing its record whole costs).
SHARED_PACKING_FROM = 10


@dataclass(frozen=True, slots=True)
class JobBuilder:
    """Builds the jobs of one enqueue call from their arguments; the rest they share."""

    stage: Stage  # as created: enqueued, or delayed until run_at
    run_at: datetime
    enqueued_at: datetime
    shared: dict[str, Any]  # the JobRecord fields but the id and the arguments

    @property
    def task_path(self) -> str:
        return self.shared["task_path"]

    @property
    def plain(self) -> bool:
        """Whether the jobs are neither ordered (topic) nor continuations."""
        return self.shared.get("topic") is None and self.shared["parent_id"] is None

    def check(
        self, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]]
    ) -> list[tuple[list[Any], dict[str, Any]]]:
        """Each call's arguments as stored, or SerializationError naming the bad one."""
        return [check_arguments(self.task_path, args, kwargs) for args, kwargs in calls]

    def build(self, checked: Sequence[tuple[list[Any], dict[str, Any]]]) -> list[NewJob]:
        """The jobs of calls whose arguments passed :meth:`check`.

        Plain jobs of a large call get their record's bytes now, with what the
        calls share packed once (ordered jobs and continuations have fields
        filled in later; the jobs of a small call are packed as they are stored).
        """
        jobs = []
        shared = self.shared
        records = (
            NewRecords(JobRecord(id="", args=[], kwargs={}, **shared))
            if self.plain and len(checked) >= SHARED_PACKING_FROM
            else None
        )
        for args, kwargs in checked:
            record = JobRecord(id=new_job_id(), args=args, kwargs=kwargs, **shared)
            jobs.append(
                NewJob(
                    record=record,
                    stage=self.stage,
                    run_at=self.run_at,
                    enqueued_at=self.enqueued_at,
                    value=records.encode(record) if records is not None else None,
                )
            )
        return jobs


class LaterBackend(BaseTaskBackend):
    task_class = LaterTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        self.options_error: InvalidArgument | None = None
        try:
            self.later = options_module.parse(self.options, alias=alias)
        except InvalidArgument as e:
            self.options_error = e
            self.later = options_module.BackendOptions(alias=alias)

    @property
    def namespace(self) -> str:
        return self.later.namespace

    @property
    def database(self) -> str:
        return self.later.database

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        errors: list[checks.CheckMessage] = []
        if self.options_error is not None:
            errors.append(
                checks.Error(
                    f"TASKS[{self.alias!r}]: {self.options_error}",
                    hint="See docs/configuration.md for every option, its type and default.",
                    id="later.E002",
                )
            )
        else:
            from .checks import check_renewal
            from .schedules.definitions import check_declared

            errors.extend(check_declared(self.later))
            errors.extend(check_renewal(self.alias, self.later.lease_seconds))
        if self.later.database not in settings.DATABASES:
            errors.append(
                checks.Error(
                    f"TASKS[{self.alias!r}]['OPTIONS']['database'] is {self.later.database!r}, "
                    "which is not a DATABASES alias.",
                    hint=f"Use one of: {', '.join(settings.DATABASES)}.",
                    id="later.E003",
                )
            )
            return errors
        connection = connections[self.later.database]
        if connection.vendor not in ("sqlite", "postgresql"):
            errors.append(
                checks.Error(
                    f"Database {self.later.database!r} is {connection.vendor!r}; later_django "
                    "supports SQLite and PostgreSQL.",
                    id="later.E004",
                )
            )
        elif connection.vendor == "postgresql":
            from .checks import check_postgres_driver

            driver = connection.Database.__name__  # type: ignore[attr-defined]
            errors.extend(check_postgres_driver(self.later.database, driver))
        elif connection.vendor == "sqlite":
            mode = connection.settings_dict.get("OPTIONS", {}).get("transaction_mode")
            if mode != "IMMEDIATE":
                errors.append(
                    checks.Warning(
                        f"SQLite database {self.later.database!r} uses transaction_mode "
                        f"{mode!r}; enqueueing inside transaction.atomic() from several "
                        "processes can then fail with 'database is locked'.",
                        hint='Set DATABASES[...]["OPTIONS"]["transaction_mode"] = "IMMEDIATE".',
                        id="later.W001",
                    )
                )
        return errors

    def validate_task(self, task: Task) -> None:
        # Each message starts with Django's own sentence, so code matching its wording
        # still matches; ours then names the bad value. A non-numeric priority or a
        # non-datetime run_after would crash Django's comparisons, so they come first.
        if isinstance(task, UnavailableTask):  # read back from a job whose task is gone
            raise InvalidTask(task.reason)
        priority = task.priority
        if (
            isinstance(priority, bool)
            or not isinstance(priority, int)
            or not TASK_MIN_PRIORITY <= priority <= TASK_MAX_PRIORITY
        ):
            raise InvalidTask(
                f"priority must be a whole number between {TASK_MIN_PRIORITY} and "
                f"{TASK_MAX_PRIORITY}. It is {priority!r}; higher runs first."
            )
        if self.queues and task.queue_name not in self.queues:
            raise InvalidTask(
                f"Queue '{task.queue_name}' is not valid for backend. queue_name is "
                f"{task.queue_name!r}; it must be one of the QUEUES of task backend "
                f"{self.alias!r}: {', '.join(sorted(self.queues))}."
            )
        if task.run_after is not None:
            if not isinstance(task.run_after, datetime):
                raise InvalidTask(
                    f"run_after is {task.run_after!r}; it must be a datetime or a timedelta "
                    "from now."
                )
            if settings.USE_TZ and timezone.is_naive(task.run_after):
                raise InvalidTask(
                    f"run_after must be an aware datetime. It is {task.run_after!r}, a naive "
                    "datetime; with USE_TZ = True use an aware datetime or a timedelta from now."
                )
        super().validate_task(task)
        if not isinstance(task, LaterTask):
            return
        if task.max_attempts is not None and (
            isinstance(task.max_attempts, bool)
            or not isinstance(task.max_attempts, int)
            or task.max_attempts < 1
        ):
            raise InvalidTask(
                f"max_attempts is {task.max_attempts!r}; it must be a whole number >= 1 "
                "(it counts the first attempt)."
            )
        if task.timeout is not None and (
            isinstance(task.timeout, bool)
            or not isinstance(task.timeout, int | float)
            or not 0 < task.timeout <= options_module.MAX_SECONDS
        ):
            raise InvalidTask(
                f"timeout is {task.timeout!r}; it must be a number of seconds > 0 and at most "
                f"{options_module.MAX_SECONDS:.0f} (100 years)."
            )
        if not isinstance(task.atomic, bool):
            raise InvalidTask(f"atomic is {task.atomic!r}; it must be True or False.")
        if task.atomic and iscoroutinefunction(task.func):
            raise InvalidTask(
                f"atomic=True needs a plain function, and {task.module_path!r} is async: its "
                "database calls would run in other threads, outside the job's transaction."
            )
        if task.backoff is not None:
            try:
                backoff_module.resolve(task.backoff)
            except InvalidArgument as e:
                raise InvalidTask(str(e)) from e
        validate_routing(task)

    def backoff_for(self, task: Task) -> backoff_module.BackoffPolicy:
        if isinstance(task, LaterTask) and task.backoff is not None:
            return backoff_module.resolve(task.backoff)
        return self.later.backoff

    def _new_jobs(
        self, task: Task, calls: Iterable[tuple[Sequence[Any], Mapping[str, Any]]]
    ) -> list[NewJob]:
        """Jobs for ``task`` called with each ``(args, kwargs)``; the caller validated ``task``."""
        builder = self._job_builder(task)
        return builder.build(builder.check(calls))

    def _job_builder(self, task: Task) -> JobBuilder:
        """What every job of one enqueue call shares, worked out once; the caller validated
        ``task``. The jobs of one call share their enqueue time."""
        if self.options_error is not None:
            raise self.options_error
        now = timezone.now()
        # With USE_TZ off, Django lets run_after be naive (local time) or aware.
        run_at = django_time(task.run_after) if task.run_after is not None else now
        options = task if isinstance(task, LaterTask) else None
        return JobBuilder(
            stage=Stage.DELAYED if run_at > now else Stage.ENQUEUED,
            run_at=run_at,
            enqueued_at=now,
            shared=dict(
                task_path=task.module_path,
                queue_name=task.queue_name,
                priority=task.priority,
                backend=self.alias,
                enqueued_at=to_micros(now) or 0,
                run_after=to_micros(task.run_after) if task.run_after else None,
                max_attempts=(
                    options.max_attempts
                    if options is not None and options.max_attempts is not None
                    else self.later.max_attempts
                ),
                timeout=options.timeout if options is not None else None,
                parent_id=options.after if options is not None else None,
                **route_fields(self.later, task),
            ),
        )

    def _result(self, task: Task, job: NewJob) -> TaskResult:
        # The record's arguments were normalised by the check, and it is stored (or on
        # its way) before its result is made: the result may hold them as they are.
        return new_result(
            task=task,
            id=job.record.id,
            status=STATUS[job.stage],
            enqueued_at=job.enqueued_at,
            started_at=None,
            last_attempted_at=None,
            finished_at=None,
            args=job.record.args,
            kwargs=job.record.kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )

    def _result_for(self, task: Task, job: NewJob) -> TaskResult:
        result = self._result(task, job)
        task_enqueued.send(type(self), task_result=result)
        return result

    def _insert(self, jobs: list[NewJob]) -> None:
        # Ordered (topic) jobs get their sequence numbers in the same transaction, and a
        # continuation may inherit its parent's partition; other jobs pass no topic code.
        if any(job.record.topic is not None or job.record.parent_id is not None for job in jobs):
            insert_with_partitions(self.later, jobs, self._insert_rows)
        else:
            self._insert_rows(jobs)

    def _insert_rows(self, jobs: Sequence[NewJob]) -> None:
        if any(job.record.parent_id is not None for job in jobs):
            # Continuations take their stage from the parent's, read under a lock.
            insert_continuations(self.later, jobs)
        else:
            insert_jobs(self.namespace, jobs, using=self.database)

    def enqueue_partitioned(
        self,
        task: Task,
        args: Sequence[Any],
        kwargs: dict[str, Any],
        *,
        topic: str,
        key: str,
        **using_options: Any,
    ) -> TaskResult:
        """Enqueue ``task`` into partition ``key`` of ``topic``, whether or not it is ordered.

        For code that orders a task by its own key, such as sequential schedules
        (topic ``"later.schedules"``, keyed by schedule identifier).
        ``using_options`` go to ``task.using()``. Runs in the caller's transaction.
        """
        if not isinstance(task, LaterTask):
            raise InvalidArgument(
                f"task is {task!r}; only tasks of a Later backend (LaterTask) can be partitioned."
            )
        if using_options:
            task = task.using(**using_options)
        ordered = replace(task, topic=topic, partition_key=key)
        return self.enqueue(ordered, list(args), dict(kwargs))

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Store a job in the current transaction of the backend's database."""
        self.validate_task(task)
        [job] = self._new_jobs(task, [(args, kwargs)])
        self._insert([job])
        return self._result_for(task, job)

    def enqueue_many(
        self, task: Task, calls: Iterable[tuple[Sequence[Any], dict[str, Any]]]
    ) -> list[TaskResult]:
        """Store many calls of one task in one transaction: on PostgreSQL a statement for up
        to ``STREAMED_BATCH`` jobs, and batches of that size sent without waiting between
        them for more; on SQLite one ``executemany`` a table."""
        self.validate_task(task)  # once: every call shares the task and its options
        builder = self._job_builder(task)
        calls = list(calls)
        if len(calls) <= STREAMED_BATCH or not builder.plain:
            # Every call is checked before anything is written, so a bad one leaves the
            # caller's transaction as it was.
            jobs = builder.build(
                builder.check(check_call(number, call) for number, call in enumerate(calls))
            )
            self._insert(jobs)
            return [self._result_for(task, job) for job in jobs]
        # Many plain jobs go in batches, each checked and built while the database writes
        # the last one. A bad call raises from inside the write's savepoint (or its own
        # transaction), which undoes the batches before it: the caller's transaction is
        # left as it was all the same.
        results: list[TaskResult] = []

        def batches() -> Iterator[list[NewJob]]:
            for start in range(0, len(calls), STREAMED_BATCH):
                checked = builder.check(
                    check_call(start + number, call)
                    for number, call in enumerate(calls[start : start + STREAMED_BATCH])
                )
                jobs = builder.build(checked)
                yield jobs
                results.extend(self._result(task, job) for job in jobs)

        insert_batches(self.namespace, batches(), using=self.database)
        for result in results:  # once every batch is stored
            task_enqueued.send(type(self), task_result=result)
        return results

    def get_result(self, result_id: str) -> TaskResult:
        result = load_result(self.later, result_id)
        if result is None:
            raise TaskResultDoesNotExist(result_id)
        return result


def validate_routing(task: Task) -> None:
    """Raise InvalidTask for a malformed ``topic`` or a ``partition_key`` without a topic."""
    topic = getattr(task, "topic", None)
    key = getattr(task, "partition_key", None)
    try:
        if topic is not None:
            validate_name("topic", topic)
        if key is not None:
            check_key(key)
    except InvalidArgument as e:
        raise InvalidTask(str(e)) from e
    if key is not None and topic is None:
        raise InvalidTask(
            f"partition_key is {key!r} but task {task.module_path!r} has no topic; only "
            "tasks declared with @task(topic=...) take a partition key."
        )
