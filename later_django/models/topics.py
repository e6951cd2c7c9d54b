"""Topic partition tables: per-key strict order with fenced partition leases."""

from django.db import models

from .core import JOB_ID_LENGTH, NAMESPACE_LENGTH, OWNER_LENGTH

TOPIC_LENGTH = 100


class Topic(models.Model):
    """A topic's fixed partition count, shared by every producer and worker."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    name = models.CharField(max_length=TOPIC_LENGTH)
    partition_count = models.PositiveIntegerField()
    created_at = models.DateTimeField()

    class Meta:
        db_table = "later_topic"
        constraints = [
            # producers look their topic up by name
            models.UniqueConstraint(fields=["namespace", "name"], name="later_topic_name_uniq"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.partition_count})"


class PartitionSequence(models.Model):
    """The next sequence number of one partition, allocated in the enqueuer's transaction."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    topic = models.CharField(max_length=TOPIC_LENGTH)
    partition = models.PositiveIntegerField()
    next_sequence = models.BigIntegerField(default=1)

    class Meta:
        db_table = "later_partition_sequence"
        constraints = [
            # UPDATE ... SET next_sequence = next_sequence + 1 WHERE (namespace, topic, partition)
            models.UniqueConstraint(
                fields=["namespace", "topic", "partition"], name="later_partseq_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] next={self.next_sequence}"


class PartitionJob(models.Model):
    """One queued job of a partition at its sequence number."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    topic = models.CharField(max_length=TOPIC_LENGTH)
    partition = models.PositiveIntegerField()
    sequence = models.BigIntegerField()
    job_id = models.CharField(max_length=JOB_ID_LENGTH)
    available_at = models.DateTimeField()

    class Meta:
        db_table = "later_partition_job"
        constraints = [
            # advancing the head: the next row after a sequence, and the dashboard's lag count
            models.UniqueConstraint(
                fields=["namespace", "topic", "partition", "sequence"],
                name="later_partjob_seq_uniq",
            ),
        ]
        indexes = [
            # job detail: which partition row holds this job
            models.Index(fields=["namespace", "job_id"], name="later_partjob_job_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]#{self.sequence}"


class PartitionHead(models.Model):
    """The materialised first queued row of an active partition."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    topic = models.CharField(max_length=TOPIC_LENGTH)
    partition = models.PositiveIntegerField()
    sequence = models.BigIntegerField()
    job_id = models.CharField(max_length=JOB_ID_LENGTH)
    available_at = models.DateTimeField()

    class Meta:
        db_table = "later_partition_head"
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "topic", "partition"], name="later_parthead_uniq"
            ),
        ]
        indexes = [
            # claim: runnable heads, WHERE namespace=? AND available_at <= now ORDER BY available_at
            models.Index(fields=["namespace", "available_at"], name="later_parthead_ready_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] head={self.sequence}"


class PartitionLease(models.Model):
    """Who owns a partition, until when, and its fencing epoch."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    topic = models.CharField(max_length=TOPIC_LENGTH)
    partition = models.PositiveIntegerField()
    owner = models.CharField(max_length=OWNER_LENGTH, null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    epoch = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_partition_lease"
        constraints = [
            # claim / renew / fence: WHERE (namespace, topic, partition) [AND owner=? AND epoch=?]
            models.UniqueConstraint(
                fields=["namespace", "topic", "partition"], name="later_partlease_uniq"
            ),
        ]
        indexes = [
            # renewal of every lease one worker holds
            models.Index(fields=["namespace", "owner"], name="later_partlease_owner_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] {self.owner} epoch={self.epoch}"


class Worker(models.Model):
    """A live worker process's heartbeat; the live set feeds partition assignment."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    worker_id = models.CharField(max_length=OWNER_LENGTH)
    hostname = models.CharField(max_length=255)
    pid = models.IntegerField()
    queues = models.JSONField(default=list)
    concurrency = models.PositiveIntegerField(default=1)
    started_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()

    class Meta:
        db_table = "later_worker"
        constraints = [
            models.UniqueConstraint(fields=["namespace", "worker_id"], name="later_worker_id_uniq"),
        ]
        indexes = [
            # live set: WHERE namespace=? AND heartbeat_at > now - dead_after
            models.Index(fields=["namespace", "heartbeat_at"], name="later_worker_heartbeat_idx"),
        ]

    def __str__(self) -> str:
        return self.worker_id
