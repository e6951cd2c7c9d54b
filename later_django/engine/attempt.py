"""What became of one attempt: the ``Outcome`` a slot hands to the writer, and its plan.

An outcome's kind is not a stage, though three kinds name the stage they
lead to; ``plan`` gives the stage, the next run time and whether it ends the
job. ``outcomes.py`` stores outcomes; ``honouring.py`` re-plans those a cancel
reached.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from ..records import JobRecord, to_micros
from ..states import Stage

# What became of an attempt; not stages, though three of them name the stage they lead to.
SUCCESS, FAILED, RETRY, RELEASE = "success", "failed", "retry", "release"
CANCELLED = str(Stage.CANCELLED)  # stopped after a cancel reached the worker


@dataclass
class Outcome:
    job_id: str
    epoch: int
    kind: str  # SUCCESS, FAILED, RETRY, RELEASE or CANCELLED
    record: JobRecord | None
    finished_at: datetime
    retry_at: datetime | None = None
    transitions: list[str] = field(default_factory=list)
    routine: bool = False  # logged at DEBUG whatever its kind (a release when handing back)
    released: bool = False  # a release that a cancel turned into CANCELLED
    # An atomic task's outcome is stored in the task's own transaction (executing.py):
    # True once committed there, False if fenced out there; None waits for the writer.
    stored: bool | None = None

    @property
    def attempts_delta(self) -> int:
        """A release hands the attempt back: its record no longer has it, nor its index row."""
        return -1 if self.kind == RELEASE or self.released else 0

    @property
    def may_touch_partition(self) -> bool:
        """Whether storing it can advance a partition head: a topic job's, or one whose
        record could not be read."""
        return self.record is None or self.record.topic is not None


def plan(outcome: Outcome, now: datetime) -> tuple[Stage, datetime | None, bool]:
    """The stage an outcome moves its job to, its next run time, and whether it is final."""
    if outcome.kind == RETRY and outcome.retry_at is not None and outcome.retry_at > now:
        return Stage.REQUEUED, outcome.retry_at, False
    if outcome.kind in (RETRY, RELEASE):
        return Stage.ENQUEUED, now, False
    if outcome.kind == CANCELLED:
        return Stage.CANCELLED, None, True
    return (Stage.SUCCESS if outcome.kind == SUCCESS else Stage.FAILED), None, True


def planned(o: Outcome, now: datetime) -> tuple[Outcome, Stage, datetime | None, bool]:
    """``o`` with its plan, the plan's stage (and end, if final) written into its record."""
    stage, run_at, terminal = plan(o, now)
    if o.record is not None:
        o.record.stage = stage
        if terminal:
            o.record.finished_at = to_micros(o.finished_at)
    return o, stage, run_at, terminal
