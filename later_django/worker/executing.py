"""Running one claimed job's task function and turning what happened into an Outcome."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from contextlib import nullcontext
from copy import deepcopy
from dataclasses import replace
from datetime import timedelta
from functools import lru_cache
from inspect import iscoroutinefunction
from traceback import format_exception
from typing import TYPE_CHECKING, Any

from django.db import DatabaseError, close_old_connections, transaction
from django.utils import timezone

from ..backoff import delay_seconds
from ..db import write_transaction
from ..engine.claiming import LOST_ATTEMPTS_LIMIT, Claimed
from ..engine.outcomes import CANCELLED, FAILED, RETRY, SUCCESS, Outcome, record_outcomes
from ..engine.reads import stand_in
from ..exceptions import InterruptedByCancel, LaterError, TaskTimeout, UndecodableJob
from ..models import JobIndexRow
from ..records import Attempt, ErrorEntry, JobRecord, check_value, storable_text, to_micros
from ..results import build_result, resolve_task
from ..states import Stage
from ..tasks_api import TaskResultStatus, task_finished, task_started
from ..topics.context import context_for

if TYPE_CHECKING:
    from ..backend import LaterBackend

logger = logging.getLogger(__name__)


class _IndexRow:
    """The few index-row fields build_result reads, for a job this worker is running."""

    def __init__(self, stage: str) -> None:
        self.stage = stage


def error_entry(exc: BaseException, worker_id: str) -> ErrorEntry:
    kind = type(exc)
    return ErrorEntry(
        exception_class_path=f"{kind.__module__}.{kind.__qualname__}",
        traceback=storable_text("".join(format_exception(exc))),
        at=to_micros(timezone.now()) or 0,
        worker_id=worker_id,
    )


def failed_outcome(item: Claimed, exc: BaseException, worker_id: str) -> Outcome:
    """An outcome that ends the job FAILED with ``exc`` recorded, without running it."""
    record = item.record
    if record is not None:
        record.errors.append(error_entry(exc, worker_id))
        if record.attempts:
            record.attempts[-1].outcome = "error"
            record.attempts[-1].finished_at = to_micros(timezone.now())
    return Outcome(item.job_id, item.epoch, FAILED, record, timezone.now())


def cancelled_outcome(item: Claimed, exc: BaseException | None, worker_id: str) -> Outcome:
    """An outcome that ends the job CANCELLED after a cancel reached it; ``exc`` is what the
    task raised as it stopped, if anything (kept as an error). The reason is stored with it
    (``engine.honouring.honour``)."""
    now = timezone.now()
    record = item.record
    if record is not None:
        if exc is not None:
            record.errors.append(error_entry(exc, worker_id))
        if record.attempts:
            record.attempts[-1].outcome = CANCELLED
            record.attempts[-1].finished_at = to_micros(now)
    return Outcome(item.job_id, item.epoch, CANCELLED, record, now)


def abandoned_cancel_outcome(item: Claimed, worker_id: str) -> Outcome:
    """The outcome of a cancelled job whose thread was abandoned past its grace: CANCELLED,
    on a copy of the record, which the abandoned thread still holds."""
    copy = replace(item, record=deepcopy(item.record))
    return cancelled_outcome(
        copy,
        InterruptedByCancel(
            f"Job {item.job_id!r} was cancelled and did not stop when interrupted; its "
            "thread was abandoned."
        ),
        worker_id,
    )


# Django closes a job's database connections that broke or outlived CONN_MAX_AGE
# (``close_old_connections``) before the job and after it, as around a request. A
# slot whose last job ended less than this long ago skips the check before the
# next: it would find the connections as the last check left them, and it cost 4 %
# of a worker's time on short jobs. A connection may so outlive CONN_MAX_AGE by
# this much at most.
CONNECTIONS_CHECKED_FOR = 1.0
_connections = threading.local()  # checked_until: a monotonic time


def undecodable_outcome(item: Claimed, backend: LaterBackend, worker_id: str) -> Outcome:
    """Fail a job whose stored record cannot be decoded, keeping the reason as its error.

    The outcome carries a stand-in record built from the index row (the
    stored bytes go with it), so the failure is stored like any other; a job
    with no stored record at all has nowhere to keep it.
    """
    assert item.decode_error is not None
    if item.undecodable is not None:
        close_old_connections()
        row = (
            JobIndexRow.objects.using(backend.database)
            .filter(namespace=backend.namespace, job_id=item.job_id)
            .first()
        )
        if row is not None:
            item.record = stand_in(row, item.undecodable, item.decode_error)
            started = to_micros(item.claimed_at) or 0
            item.record.attempts.append(Attempt(worker_id=item.owner, started_at=started))
    return failed_outcome(item, item.decode_error, worker_id)


def abandoned_outcome(
    item: Claimed, exc: TaskTimeout, backend: LaterBackend, worker_id: str
) -> Outcome:
    """The outcome of a job whose thread was abandoned past its timeout.

    It is a timed-out attempt like any other, so the task's retry policy
    decides between a retry and FAILED. The outcome gets a copy of the record:
    the abandoned thread still holds the original and may write to it when
    (if ever) its call returns.
    """
    if item.record is None or not item.record.attempts:
        return failed_outcome(item, exc, worker_id)
    record = deepcopy(item.record)
    try:
        task = resolve_task(record.task_path)
    except LaterError:
        record.errors.append(error_entry(exc, worker_id))
        record.attempts[-1].outcome = "timeout"
        return Outcome(item.job_id, item.epoch, FAILED, record, timezone.now())
    result = build_result(backend.later, _IndexRow(Stage.RUNNING), record, task)  # type: ignore[arg-type]
    return _failure(item, record, exc, backend, worker_id, result)


@lru_cache(maxsize=1024)
def _is_async(func: Any) -> bool:
    """Whether a task's function is a coroutine function: asked once per function."""
    return iscoroutinefunction(func)


def _call(task: Any, args: list[Any], kwargs: dict[str, Any], timeout: float | None) -> Any:
    thread = threading.current_thread()
    if not _is_async(task.func):
        thread.in_task = True  # type: ignore[attr-defined]
        try:
            return task.func(*args, **kwargs)
        finally:
            thread.in_task = False  # type: ignore[attr-defined]

    async def bounded() -> Any:
        # The slot cancels this asyncio task to interrupt a cancelled job (slots.py).
        thread.running_loop = (asyncio.get_running_loop(), asyncio.current_task())  # type: ignore[attr-defined]
        return await asyncio.wait_for(task.func(*args, **kwargs), timeout)

    try:
        return asyncio.run(bounded())
    except TimeoutError as e:
        raise TaskTimeout(
            f"Task {task.module_path!r} ran longer than its timeout of {timeout} seconds."
        ) from e
    except asyncio.CancelledError as e:
        if getattr(thread, "cancel_interrupted", False):
            raise InterruptedByCancel() from e
        raise
    finally:
        thread.running_loop = None  # type: ignore[attr-defined]


def execute(item: Claimed, backend: LaterBackend, worker_id: str) -> Outcome:
    """Run a claimed job and return its outcome.

    Never raises for what the task raises, BaseExceptions included: each is the
    attempt's failure, retried or FAILED by the task's policy.
    """
    # Whether this thread's connections were checked at the end of its last job, just
    # now: nothing has used them since, so checking them again before this one would
    # find them as they were. A check is consumed by the job that skips its own.
    checked = time.monotonic() < getattr(_connections, "checked_until", 0.0)
    _connections.checked_until = 0.0
    record = item.record
    if record is None:
        return undecodable_outcome(item, backend, worker_id)
    if record.decode_error is not None:
        # A stand-in kept after a decode failure: its arguments are lost, so never run it.
        return failed_outcome(
            item,
            UndecodableJob(f"Job {record.id!r} cannot run again: {record.decode_error}"),
            worker_id,
        )
    lost = sum(1 for a in record.attempts if a.outcome == "lost")
    if lost >= LOST_ATTEMPTS_LIMIT:
        return failed_outcome(
            item,
            LaterError(
                f"Job {record.id!r} was abandoned by {lost} workers that stopped while running "
                f"it; after {LOST_ATTEMPTS_LIMIT} such losses it is failed rather than retried."
            ),
            worker_id,
        )
    if item.cancel.is_set() or record.cancel_requested_at is not None:
        # Cancelled before it started here (while held, or before its last worker stopped).
        return cancelled_outcome(item, None, worker_id)
    if not checked:
        close_old_connections()
    try:
        try:
            task = resolve_task(record.task_path)
        except LaterError as e:
            return failed_outcome(item, e, worker_id)
        if getattr(task, "atomic", False):
            return _attempt_atomically(item, task, record, backend, worker_id)
        return _attempt(item, task, record, backend, worker_id)
    finally:
        close_old_connections()
        _connections.checked_until = time.monotonic() + CONNECTIONS_CHECKED_FOR


class _ReturnedAfterCancel(Exception):
    """Raised inside an atomic task's savepoint to undo the writes of a run that returned
    once its cancel had reached it: the job ends CANCELLED, so its writes must not stay."""


class _Fenced(Exception):
    """Raised to roll back an atomic task's transaction whose outcome was fenced out."""


def _attempt(
    item: Claimed,
    task: Any,
    record: JobRecord,
    backend: LaterBackend,
    worker_id: str,
    *,
    savepoint: str | None = None,
) -> Outcome:
    """Run the task once and return the attempt's outcome; with ``savepoint`` (a database
    alias), its body runs in a savepoint there, undone unless it returns a value to keep."""
    result = build_result(backend.later, _IndexRow(Stage.RUNNING), record, task)  # type: ignore[arg-type]
    task_started.send(sender=type(backend), task_result=result)
    args = list(record.args)
    if task.takes_context:
        args.insert(0, context_for(item, result))  # ordered jobs also see their epoch
    body = nullcontext() if savepoint is None else transaction.atomic(using=savepoint)
    try:
        with body:
            value = _call(task, args, record.kwargs, record.timeout)
            value = check_value(value, name="return value", task_path=record.task_path)
            if savepoint is not None and item.cancel.is_set():
                raise _ReturnedAfterCancel()
    except BaseException as e:  # noqa: BLE001  (whatever the task raised is its outcome)
        # SystemExit and KeyboardInterrupt too: the worker takes its signals in the
        # main thread, so in a job's thread they come from the task's own code, and
        # letting them through would end the thread with the job left running.
        if item.cancel.is_set():  # it stopped (or was interrupted) after a cancel
            stopped = None if isinstance(e, _ReturnedAfterCancel) else e
            outcome = cancelled_outcome(item, stopped, worker_id)
        else:
            outcome = _failure(item, record, e, backend, worker_id, result)
        object.__setattr__(
            result,
            "status",
            TaskResultStatus.READY if outcome.kind == RETRY else TaskResultStatus.FAILED,
        )
        object.__setattr__(result, "finished_at", outcome.finished_at)
        task_finished.send(sender=type(backend), task_result=result)
        return outcome
    finished = timezone.now()
    record.return_value = value
    if item.cancel.is_set():  # it returned once the cancel had reached it: it stopped
        outcome = cancelled_outcome(item, None, worker_id)
        object.__setattr__(result, "status", TaskResultStatus.FAILED)
        object.__setattr__(result, "finished_at", outcome.finished_at)
        task_finished.send(sender=type(backend), task_result=result)
        return outcome
    record.attempts[-1].outcome = "success"
    record.attempts[-1].finished_at = to_micros(finished)
    object.__setattr__(result, "status", TaskResultStatus.SUCCESSFUL)
    object.__setattr__(result, "finished_at", finished)
    object.__setattr__(result, "_return_value", value)
    task_finished.send(sender=type(backend), task_result=result)
    return Outcome(item.job_id, item.epoch, SUCCESS, record, finished)


def _attempt_atomically(
    item: Claimed, task: Any, record: JobRecord, backend: LaterBackend, worker_id: str
) -> Outcome:
    """Run an atomic task and store its outcome in one transaction on the jobs' database.

    The body runs in a savepoint: a failure undoes its writes and keeps the
    transaction for the failure's outcome. The outcome is stored last, fenced
    by the execution lease like any other; if the lease was taken over, the
    whole transaction rolls back, the body's writes with it. So the body's
    writes commit exactly when the outcome that ends (or retries) the attempt
    does. On SQLite the transaction holds the write lock from its start.
    """
    using = backend.database
    clean = deepcopy(record)  # for a transaction that cannot commit: the attempt as it began
    outcome: Outcome | None = None
    try:
        with write_transaction(using):
            outcome = _attempt(item, task, record, backend, worker_id, savepoint=using)
            stored = record_outcomes(
                backend.namespace,
                item.owner,
                [outcome],
                retention_seconds=backend.later.retention_seconds,
                using=using,
            )
            if not stored:
                raise _Fenced()
    except _Fenced:
        assert outcome is not None
        outcome.stored = False
        return outcome
    except DatabaseError as e:
        # Nothing committed (or, if the connection broke during COMMIT, perhaps all of
        # it: then the lease is gone and the outcome below is fenced out).
        logger.warning(
            "job id=%s: its atomic transaction did not commit (%s); nothing it wrote is kept",
            item.job_id,
            e,
        )
        close_old_connections()
        if outcome is not None and outcome.kind != SUCCESS:
            # The body failed first (often what broke the transaction): that failure is
            # the attempt's, and the writer stores it. A store that ran before the COMMIT
            # failed noted its transition; the writer notes it again when it stores.
            outcome.transitions.clear()
            return outcome
        # The attempt fails with this error and is retried, by the task's policy.
        item.record = clean
        result = build_result(backend.later, _IndexRow(Stage.RUNNING), clean, task)  # type: ignore[arg-type]
        if item.cancel.is_set():
            return cancelled_outcome(item, e, worker_id)
        return _failure(item, clean, e, backend, worker_id, result)
    outcome.stored = True
    return outcome


def _failure(
    item: Claimed,
    record: JobRecord,
    exc: BaseException,
    backend: LaterBackend,
    worker_id: str,
    result: Any,
) -> Outcome:
    now = timezone.now()
    record.errors.append(error_entry(exc, worker_id))
    record.attempts[-1].outcome = "timeout" if isinstance(exc, TaskTimeout) else "error"
    record.attempts[-1].finished_at = to_micros(now)
    failures = sum(1 for a in record.attempts if a.outcome in ("error", "timeout"))
    if failures < record.max_attempts:
        try:
            task = resolve_task(record.task_path)
            delay = delay_seconds(backend.backoff_for(task), exc, replace(result))
            # Inside the try: a delay too large for a datetime fails the policy, not the job's
            # outcome, which would then lose the task's own error.
            retry_at = None if delay is None else now + timedelta(seconds=delay)
        except Exception:
            logger.exception("backoff policy failed for job id=%s; not retrying", record.id)
            retry_at = None
        if retry_at is not None:
            return Outcome(item.job_id, item.epoch, RETRY, record, now, retry_at=retry_at)
    return Outcome(item.job_id, item.epoch, FAILED, record, now)
