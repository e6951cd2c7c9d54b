"""Finish jobs in the test process through the worker's own claim and outcome code."""

from __future__ import annotations

from django.utils import timezone

from later_django.engine.claiming import Claimed, claim
from later_django.engine.outcomes import SUCCESS, Outcome, record_outcomes
from later_django.models import DeliveryCommand, JobIndexRow

NAMESPACE = "tests"
OWNER = "test-process"


def claim_ready() -> list[Claimed]:
    """Claim every job runnable now, as one worker with plenty of free slots would."""
    claimed: list[Claimed] = []
    while batch := claim(NAMESPACE, OWNER, queues=None, free=16, lease_seconds=30, using="default"):
        claimed += batch
    return claimed


def finish(claimed: list[Claimed], kind: str = SUCCESS, **extra) -> list[Outcome]:
    """Store one outcome of ``kind`` for each claimed job; return those written."""
    outcomes = [
        Outcome(c.job_id, c.epoch, kind, c.record, timezone.now(), **extra) for c in claimed
    ]
    return record_outcomes(NAMESPACE, OWNER, outcomes, retention_seconds=3600, using="default")


def stage_of(job_id: str) -> str:
    return JobIndexRow.objects.get(namespace=NAMESPACE, job_id=job_id).stage


def has_command(job_id: str) -> bool:
    return DeliveryCommand.objects.filter(namespace=NAMESPACE, job_id=job_id).exists()
