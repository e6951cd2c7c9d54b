"""Dashboard tables: one index row per job, exact stage counters, metric buckets."""

from functools import reduce
from operator import or_

from django.db import models
from django.db.models import Q

from ..states import FINISHED, INDEX_LISTED, SCHEDULED, Stage
from .core import JOB_ID_LENGTH, NAMESPACE_LENGTH, OWNER_LENGTH, QUEUE_NAME_LENGTH
from .topics import TOPIC_LENGTH

# The labels Django's TextChoices gave these values, which the migrations record.
STAGE_CHOICES = [(stage.value, stage.name.capitalize()) for stage in Stage]

# The rows of the listing indexes: every stage but a queued job's without a topic,
# which the delivery queue lists (states.INDEX_LISTED). Spelled as one OR of
# equalities, not IN: SQLite uses a partial index only when a term of the query's
# WHERE (stage = 'failed') is a term of the index's own.
INDEX_LISTED_ROWS = reduce(
    or_, [Q(stage=stage.value) for stage in INDEX_LISTED], Q(topic__isnull=False)
)


class JobIndexRow(models.Model):
    """One row per job, upserted at every stage change.

    ``revision`` rises with every change; a write carrying an older revision
    than the stored one is ignored, so a late write never undoes a newer stage.
    """

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    job_id = models.CharField(max_length=JOB_ID_LENGTH)
    task_path = models.CharField(max_length=255)
    queue_name = models.CharField(max_length=QUEUE_NAME_LENGTH)
    priority = models.SmallIntegerField(default=0)
    stage = models.CharField(max_length=16, choices=STAGE_CHOICES)
    revision = models.BigIntegerField(default=1)
    attempts = models.PositiveIntegerField(default=0)
    enqueued_at = models.DateTimeField()
    run_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    transitioned_at = models.DateTimeField()
    worker_id = models.CharField(max_length=OWNER_LENGTH, null=True, blank=True)
    topic = models.CharField(max_length=TOPIC_LENGTH, null=True, blank=True)
    partition = models.PositiveIntegerField(null=True, blank=True)
    sequence = models.BigIntegerField(null=True, blank=True)
    parent_job_id = models.CharField(max_length=JOB_ID_LENGTH, null=True, blank=True)
    date_expire = models.DateTimeField(null=True, blank=True)
    # Set by the enqueue of a continuation: its outcome must release or cancel children.
    has_children = models.BooleanField(db_default=False)
    # Set by a cancel of the running job (cancelling.py): its worker's outcome, which locks
    # this row first, then ends it cancelled; retry_job clears it.
    cancel_requested_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "later_jobs_index"
        verbose_name = "job"
        constraints = [
            # upsert and lookup by job id
            models.UniqueConstraint(
                fields=["namespace", "job_id"], name="later_jobsindex_job_uniq"
            ),
        ]
        indexes = [
            # jobs by stage, newest transition first, keyset cursor (transitioned_at, id);
            # partial: a queued job without a topic is listed from the delivery queue
            models.Index(
                "namespace",
                "stage",
                models.F("transitioned_at").desc(),
                models.F("id").desc(),
                name="later_jobsindex_stage_idx",
                condition=INDEX_LISTED_ROWS,
            ),
            # the same listing filtered by task
            models.Index(
                "namespace",
                "task_path",
                "stage",
                models.F("transitioned_at").desc(),
                name="later_jobsindex_task_idx",
                condition=INDEX_LISTED_ROWS,
            ),
            # promotion of due delayed/requeued jobs: WHERE stage IN (...) AND run_at <= now
            models.Index(
                fields=["namespace", "run_at"],
                name="later_jobsindex_due_idx",
                condition=Q(stage__in=list(SCHEDULED)),
            ),
            # previous/next job of a partition and the per-partition listing
            models.Index(
                fields=["namespace", "topic", "partition", "sequence"],
                name="later_jobsindex_part_idx",
                condition=Q(topic__isnull=False),
            ),
            # finished jobs of a partition beyond its newest keep_last (topics/history.py)
            models.Index(
                fields=["namespace", "topic", "partition", "sequence"],
                name="later_jobsindex_done_idx",
                condition=Q(topic__isnull=False, stage__in=list(FINISHED)),
            ),
            # continuations waiting on a parent
            models.Index(
                fields=["namespace", "parent_job_id"],
                name="later_jobsindex_parent_idx",
                condition=Q(parent_job_id__isnull=False),
            ),
            # sweep of expired (finished) rows
            models.Index(
                fields=["date_expire"],
                name="later_jobsindex_expire_idx",
                condition=Q(date_expire__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} {self.task_path} [{self.stage}]"


class StageCount(models.Model):
    """The exact number of a namespace's jobs in one stage, kept by database triggers."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    stage = models.CharField(max_length=16, choices=STAGE_CHOICES)
    count = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_stage_counts"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "stage"], name="later_stagecount_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.stage}: {self.count}"


class StageCountDelta(models.Model):
    """A change to the stage counters not yet folded into ``later_stage_counts`` (PostgreSQL).

    The enqueue statements and the index's triggers append these instead of
    updating the counter rows, so that a transaction that enqueued a job and
    stays open holds no lock any other transaction needs; workers fold them
    into the totals every second.
    """

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    stage = models.CharField(max_length=16, choices=STAGE_CHOICES)
    delta = models.BigIntegerField()

    class Meta:
        db_table = "later_stage_count_delta"
        indexes = [
            # reading totals: SUM(delta) WHERE namespace = ? GROUP BY stage
            models.Index(fields=["namespace", "stage"], name="later_stagedelta_ns_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.stage}: {self.delta:+d}"


class JobTransitionMetric(models.Model):
    """How many jobs entered a stage during one minute."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    stage = models.CharField(max_length=16, choices=STAGE_CHOICES)
    bucket = models.DateTimeField(help_text="Start of the minute.")
    count = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_job_transition_metrics"
        constraints = [
            # throughput: SUM(count) WHERE namespace=? AND stage=? AND bucket >= now - window
            models.UniqueConstraint(
                fields=["namespace", "stage", "bucket"], name="later_transition_bucket_uniq"
            ),
        ]
        indexes = [
            # trimming old buckets
            models.Index(fields=["bucket"], name="later_transition_age_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.stage} {self.bucket:%H:%M} {self.count}"


class JobWaitMetric(models.Model):
    """A histogram bin of queue waits (enqueue or due time to start) during one minute."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    mode = models.CharField(max_length=16, help_text='"regular" or "sequential".')
    bucket = models.DateTimeField(help_text="Start of the minute.")
    le_ms = models.BigIntegerField(help_text="Upper bound of the bin, in milliseconds.")
    count = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_job_wait_metrics"
        constraints = [
            # median/p95: SUM(count) GROUP BY le_ms WHERE namespace=? AND mode=? AND bucket >= ?
            models.UniqueConstraint(
                fields=["namespace", "mode", "bucket", "le_ms"], name="later_wait_bucket_uniq"
            ),
        ]
        indexes = [
            models.Index(fields=["bucket"], name="later_wait_age_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.mode} {self.bucket:%H:%M} <= {self.le_ms}ms: {self.count}"


class QueueSample(models.Model):
    """Queue length at one minute; kept for a week for the dashboard's graph."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    minute = models.DateTimeField()
    queued = models.BigIntegerField(default=0)
    partitioned = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_queue_sample"
        constraints = [
            # graph: WHERE namespace=? AND minute >= now - 7 days ORDER BY minute
            models.UniqueConstraint(fields=["namespace", "minute"], name="later_queuesample_uniq"),
        ]
        indexes = [
            models.Index(fields=["minute"], name="later_queuesample_age_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.minute:%Y-%m-%d %H:%M} {self.queued}"
