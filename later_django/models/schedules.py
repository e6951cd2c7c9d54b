"""Recurring schedules: a cron string, a task call, and when it next runs."""

from django.db import models

from .core import JOB_ID_LENGTH, NAMESPACE_LENGTH

IDENTIFIER_LENGTH = 100


class Schedule(models.Model):
    """One recurring schedule, upserted by its caller-chosen identifier.

    ``revision`` rises with every change. Workers fire a due schedule by
    updating its row under a row lock (PostgreSQL) or the write lock (SQLite)
    with ``revision`` unchanged, in the transaction that enqueues the
    occurrence, so each occurrence is enqueued exactly once however many
    workers tick.
    """

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    identifier = models.CharField(max_length=IDENTIFIER_LENGTH)
    cron = models.CharField(max_length=255)
    time_zone = models.CharField(max_length=64, help_text="The zone cron was evaluated in.")
    task_path = models.CharField(max_length=255)
    payload = models.BinaryField(help_text="msgpack: args, kwargs, queue_name and priority.")
    sequential = models.BooleanField(default=False)
    # A database default, so the raw upsert that omits it stores False.
    paused = models.BooleanField(db_default=False)
    origin = models.CharField(max_length=16, help_text='"code" or "settings".')
    next_run_at = models.DateTimeField()
    last_run_at = models.DateTimeField(null=True, blank=True)
    last_job_id = models.CharField(max_length=JOB_ID_LENGTH, null=True, blank=True)
    revision = models.BigIntegerField(default=1)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "later_schedule"
        constraints = [
            # upsert / unschedule by identifier (INSERT ... ON CONFLICT)
            models.UniqueConstraint(
                fields=["namespace", "identifier"], name="later_schedule_ident_uniq"
            ),
        ]
        indexes = [
            # tick: WHERE namespace=? AND NOT paused AND next_run_at <= now ORDER BY next_run_at;
            # paused schedules are not in it, so however many there are a tick never reads them
            models.Index(
                fields=["namespace", "next_run_at"],
                condition=models.Q(paused=False),
                name="later_schedule_due_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.identifier} ({self.cron})"
