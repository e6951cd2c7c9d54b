"""The job state machine: the stages, the transitions between them, and named groups.

Every stage a job can be in, every change of stage the engine makes, and the
sets of stages the code asks about ("may this job be cancelled?") are defined
here and nowhere else. Stage values are the strings stored in the ``stage``
column of ``later_jobs_index`` (and the stage counters); ``Stage`` members are
``str``, so they compare equal to those strings and database drivers send
them as plain text.

Most transitions happen inside SQL statements that change many rows at once,
so the engine does not call ``check_transition`` on its hot paths; the table
is the specification those statements follow, and the tests observe every
change the engine makes and check it against the table. The job-state diagram
in docs/architecture.md is ``mermaid()``'s output.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import StrEnum
from typing import NamedTuple

from .exceptions import InvalidTransition
from .tasks_api import TaskResultStatus


class Stage(StrEnum):
    DELAYED = "delayed"  # enqueued with a run_after still ahead
    WAITING = "waiting"  # a continuation whose parent has not succeeded yet
    ENQUEUED = "enqueued"  # runnable now
    RUNNING = "running"  # claimed by a worker, under an execution lease
    REQUEUED = "requeued"  # failed with attempts left; runs again at its run_at
    SUCCESS = "success"
    FAILED = "failed"
    CANCELLED = "cancelled"  # by a person, by code, or because its parent did not succeed


class Transition(NamedTuple):
    old: Stage | None  # None: the job is created in ``new``
    new: Stage
    event: str  # what makes the change, as the diagram labels it


TRANSITIONS_MADE: tuple[Transition, ...] = (
    # enqueue (backend.py, engine/continuations.py, schedules)
    Transition(None, Stage.ENQUEUED, "enqueue"),
    Transition(None, Stage.DELAYED, "enqueue, run_after ahead"),
    Transition(None, Stage.WAITING, "enqueue after a parent"),
    # promotion by worker maintenance (jobs without a topic)
    Transition(Stage.DELAYED, Stage.ENQUEUED, "run_after reached"),
    Transition(Stage.REQUEUED, Stage.ENQUEUED, "retry due"),
    # claiming: a queue command, or a partition head, which is claimed when due
    # without promotion; a lapsed lease lets another worker claim a running job
    Transition(Stage.ENQUEUED, Stage.RUNNING, "claim"),
    Transition(Stage.DELAYED, Stage.RUNNING, "claim as partition head"),
    Transition(Stage.REQUEUED, Stage.RUNNING, "claim as partition head"),
    Transition(Stage.RUNNING, Stage.RUNNING, "claim after its lease lapsed"),
    # outcomes recorded by the worker that holds the execution lease
    Transition(Stage.RUNNING, Stage.SUCCESS, "returned"),
    Transition(Stage.RUNNING, Stage.FAILED, "raised, no attempts left"),
    Transition(Stage.RUNNING, Stage.REQUEUED, "raised, retry later"),
    Transition(Stage.RUNNING, Stage.ENQUEUED, "retry now, or released at shutdown"),
    # continuations, settled in the transaction that ends the parent
    Transition(Stage.WAITING, Stage.ENQUEUED, "parent succeeded"),
    Transition(Stage.WAITING, Stage.DELAYED, "parent succeeded, run_after ahead"),
    Transition(Stage.WAITING, Stage.CANCELLED, "cancel, or parent did not succeed"),
    # jobs.cancel_job
    Transition(Stage.DELAYED, Stage.CANCELLED, "cancel"),
    Transition(Stage.ENQUEUED, Stage.CANCELLED, "cancel"),
    Transition(Stage.REQUEUED, Stage.CANCELLED, "cancel"),
    # cancelling.cancel of a running job: its outcome once the cancel reached its worker,
    # or at once when its lease has lapsed
    Transition(Stage.RUNNING, Stage.CANCELLED, "cancelled while running"),
    # jobs.retry_job: a continuation whose parent is pending waits for it again
    Transition(Stage.FAILED, Stage.ENQUEUED, "retry"),
    Transition(Stage.CANCELLED, Stage.ENQUEUED, "retry"),
    Transition(Stage.CANCELLED, Stage.WAITING, "retry, parent pending"),
)


def _table(made: Iterable[Transition]) -> dict[str | None, frozenset[Stage]]:
    table: dict[str | None, set[Stage]] = {}
    for old, new, _ in made:
        table.setdefault(old, set()).add(new)
    return {old: frozenset(new) for old, new in table.items()}


# old stage (None: creation) -> the stages a job may move to from it
TRANSITIONS: Mapping[str | None, frozenset[Stage]] = _table(TRANSITIONS_MADE)

# Groups are tuples in Stage order: SQL built from them keeps one text, and
# messages list stages in the order people know them.
# Not started and not finished: what cancel_job accepts, and what a cancel ends at once.
PENDING = (Stage.DELAYED, Stage.WAITING, Stage.ENQUEUED, Stage.REQUEUED)
# Not finished (pending or running): a continuation of such a parent waits,
# and a sequential schedule holds its next occurrence back.
UNFINISHED = (Stage.DELAYED, Stage.WAITING, Stage.ENQUEUED, Stage.RUNNING, Stage.REQUEUED)
# What cancelling.cancel accepts: a pending job ends at once, a running one is asked to stop.
CANCELLABLE = UNFINISHED
# Terminal: nothing but retry_job, expiry or delete_job changes them.
FINISHED = (Stage.SUCCESS, Stage.FAILED, Stage.CANCELLED)
# Ended without succeeding: a continuation of such a parent is cancelled.
UNSUCCESSFUL = (Stage.FAILED, Stage.CANCELLED)
# What retry_job accepts: the same stages, for a different reason.
RETRYABLE = (Stage.FAILED, Stage.CANCELLED)
# Runnable at their run_at: worker maintenance promotes them then.
SCHEDULED = (Stage.DELAYED, Stage.REQUEUED)
# Listed through the job index's listing indexes. A queued job without a topic is
# listed from the delivery queue, which holds it anyway, so its enqueue writes no
# entry in them (the enqueued jobs of a topic, which have no delivery command, stay).
INDEX_LISTED = tuple(stage for stage in Stage if stage != Stage.ENQUEUED)

# django.tasks sees four statuses; a cancelled job is a failed one to it.
STATUS: Mapping[str, TaskResultStatus] = {
    Stage.DELAYED: TaskResultStatus.READY,
    Stage.WAITING: TaskResultStatus.READY,
    Stage.ENQUEUED: TaskResultStatus.READY,
    Stage.REQUEUED: TaskResultStatus.READY,
    Stage.RUNNING: TaskResultStatus.RUNNING,
    Stage.SUCCESS: TaskResultStatus.SUCCESSFUL,
    Stage.FAILED: TaskResultStatus.FAILED,
    Stage.CANCELLED: TaskResultStatus.FAILED,
}


def check_transition(old: str | None, new: str) -> None:
    """Raise InvalidTransition unless the table lets a job in ``old`` move to ``new``.

    ``old`` is None for a job being created.
    """
    allowed = TRANSITIONS.get(old, frozenset())
    if new in allowed:
        return
    start = "be created" if old is None else f"go from stage {old!r}"
    options = ", ".join(s for s in Stage if s in allowed) or "no other stage"
    raise InvalidTransition(
        f"A job cannot {start} to stage {new!r}; from there it can move to {options}."
    )


def sql_list(stages: Iterable[Stage]) -> str:
    """The stages as SQL string literals for an IN list: ``'success', 'failed'``.

    Stage values are lower-case words, so they need no escaping.
    """
    return ", ".join(f"'{stage}'" for stage in stages)


def mermaid() -> str:
    """The state diagram of ``TRANSITIONS_MADE`` in Mermaid syntax (docs/architecture.md)."""
    lines = ["stateDiagram-v2"]
    for old, new, event in TRANSITIONS_MADE:
        lines.append(f"    {old or '[*]'} --> {new}: {event}")
    lines += [f"    {stage} --> [*]: retention ends, or deleted" for stage in FINISHED]
    return "\n".join(lines) + "\n"
