"""Retained log tables: immutable records and consumer groups with fenced leases."""

from django.db import models

from .core import NAMESPACE_LENGTH, OWNER_LENGTH
from .topics import TOPIC_LENGTH

GROUP_LENGTH = 100


class LogPartition(models.Model):
    """The next offset of one retained-log partition (independent of job sequences)."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    topic = models.CharField(max_length=TOPIC_LENGTH)
    partition = models.PositiveIntegerField()
    next_offset = models.BigIntegerField(default=0)

    class Meta:
        db_table = "later_log_partition"
        constraints = [
            # append: UPDATE ... SET next_offset = next_offset + n WHERE (ns, topic, partition)
            models.UniqueConstraint(
                fields=["namespace", "topic", "partition"], name="later_logpart_uniq"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}] next={self.next_offset}"


class LogRecord(models.Model):
    """One immutable key/payload record at an offset of a partition."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    topic = models.CharField(max_length=TOPIC_LENGTH)
    partition = models.PositiveIntegerField()
    offset = models.BigIntegerField()
    key = models.BinaryField(null=True, blank=True)
    payload = models.BinaryField()
    appended_at = models.DateTimeField()

    class Meta:
        db_table = "later_log_record"
        constraints = [
            # read a partition from an offset: WHERE (namespace, topic, partition) AND offset >= ?
            models.UniqueConstraint(
                fields=["namespace", "topic", "partition", "offset"],
                name="later_logrec_offset_uniq",
            ),
        ]
        indexes = [
            # cleanup by age below the safe boundary
            models.Index(
                fields=["namespace", "topic", "partition", "appended_at"],
                name="later_logrec_age_idx",
            ),
            # compaction: the records of a key, and whether a newer one replaces each
            models.Index(
                fields=["namespace", "topic", "partition", "key", "offset"],
                name="later_logrec_key_idx",
                condition=models.Q(key__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.topic}[{self.partition}]@{self.offset}"


class LogConsumerOffset(models.Model):
    """A consumer group's next offset in one partition."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    group = models.CharField(max_length=GROUP_LENGTH)
    topic = models.CharField(max_length=TOPIC_LENGTH)
    partition = models.PositiveIntegerField()
    next_offset = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField()

    class Meta:
        db_table = "later_log_consumer_offset"
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "group", "topic", "partition"], name="later_logoffset_uniq"
            ),
        ]
        indexes = [
            # compaction/cleanup boundary: MIN(next_offset) over every group of a partition
            models.Index(
                fields=["namespace", "topic", "partition", "next_offset"],
                name="later_logoffset_min_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.group} {self.topic}[{self.partition}]@{self.next_offset}"


class LogConsumerMember(models.Model):
    """A member of a consumer group and its last heartbeat."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    group = models.CharField(max_length=GROUP_LENGTH)
    member_id = models.CharField(max_length=OWNER_LENGTH)
    joined_at = models.DateTimeField()
    heartbeat_at = models.DateTimeField()

    class Meta:
        db_table = "later_log_consumer_member"
        constraints = [
            models.UniqueConstraint(
                fields=["namespace", "group", "member_id"], name="later_logmember_uniq"
            ),
        ]
        indexes = [
            # live members of a group, for assignment
            models.Index(
                fields=["namespace", "group", "heartbeat_at"], name="later_logmember_live_idx"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.group}/{self.member_id}"


class LogConsumerLease(models.Model):
    """Which member of a group owns a partition, until when, and its fencing epoch."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    group = models.CharField(max_length=GROUP_LENGTH)
    topic = models.CharField(max_length=TOPIC_LENGTH)
    partition = models.PositiveIntegerField()
    owner = models.CharField(max_length=OWNER_LENGTH, null=True, blank=True)
    epoch = models.BigIntegerField(default=0)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "later_log_consumer_lease"
        constraints = [
            # fenced commit: WHERE (namespace, group, topic, partition) AND owner=? AND epoch=?
            models.UniqueConstraint(
                fields=["namespace", "group", "topic", "partition"], name="later_loglease_uniq"
            ),
        ]
        indexes = [
            # leave(): release every lease of one member at once
            models.Index(fields=["namespace", "group", "owner"], name="later_loglease_owner_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.group} {self.topic}[{self.partition}] {self.owner} epoch={self.epoch}"
