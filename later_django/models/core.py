"""Core tables: key-value state, ordered ranges, the delivery queue, execution leases."""

from django.db import models
from django.db.models import Q

NAMESPACE_LENGTH = 100
JOB_ID_LENGTH = 26
QUEUE_NAME_LENGTH = 100
OWNER_LENGTH = 100


class StorageValue(models.Model):
    """One key's msgpack value: job records and internal key-value state."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    key = models.CharField(max_length=255)
    value = models.BinaryField()
    date_expire = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "later_storage"
        verbose_name = "stored value"
        constraints = [
            # get / set / set_if_absent by key
            models.UniqueConstraint(fields=["namespace", "key"], name="later_storage_key_uniq"),
        ]
        indexes = [
            # sweep_expired: oldest expired rows first
            models.Index(
                fields=["date_expire"],
                name="later_storage_expire_idx",
                condition=Q(date_expire__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return self.key


class StorageRangeMember(models.Model):
    """A member of an ordered secondary index; ``id`` is its stable cursor."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    key = models.CharField(max_length=255)
    member = models.CharField(max_length=255)
    date_expire = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "later_storage_range"
        verbose_name = "range member"
        constraints = [
            # add/remove of one member; also serves range_page (namespace, key, id order)
            # through the index below
            models.UniqueConstraint(
                fields=["namespace", "key", "member"], name="later_range_member_uniq"
            ),
        ]
        indexes = [
            # range_page / range_count: WHERE namespace=? AND key=? AND id > cursor ORDER BY id
            models.Index(fields=["namespace", "key", "id"], name="later_range_page_idx"),
            # sweep_expired
            models.Index(
                fields=["date_expire"],
                name="later_range_expire_idx",
                condition=Q(date_expire__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key}:{self.member}"


class DeliveryCommand(models.Model):
    """A runnable (or in-flight) job waiting in a queue for a worker to claim it.

    ``available_at`` is when the command may next be claimed: its enqueue time
    while it waits, and its lease expiry once claimed, so a lapsed lease makes it
    claimable again with no separate recovery query.
    """

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    queue_name = models.CharField(max_length=QUEUE_NAME_LENGTH)
    job_id = models.CharField(max_length=JOB_ID_LENGTH)
    priority = models.SmallIntegerField(default=0)
    available_at = models.DateTimeField()
    lease_owner = models.CharField(max_length=OWNER_LENGTH, null=True, blank=True)
    enqueued_at = models.DateTimeField()

    class Meta:
        db_table = "later_delivery_queue"
        verbose_name = "delivery command"
        constraints = [
            # one command per job; completion deletes by job id
            models.UniqueConstraint(fields=["namespace", "job_id"], name="later_delivery_job_uniq"),
        ]
        indexes = [
            # claim: WHERE namespace=? AND available_at <= now
            #        ORDER BY priority DESC, available_at, id LIMIT 16 (FOR UPDATE SKIP LOCKED)
            models.Index(
                "namespace",
                models.F("priority").desc(),
                "available_at",
                "id",
                name="later_delivery_claim_idx",
            ),
            # lease renewal: WHERE namespace=? AND lease_owner=? (every heartbeat). Partial:
            # only claimed commands are in it, so enqueue writes no entry and a backlog
            # of waiting commands costs the renewal nothing.
            models.Index(
                fields=["namespace", "lease_owner"],
                condition=models.Q(lease_owner__isnull=False),
                name="later_delivery_owner_idx",
            ),
        ]

    def __str__(self) -> str:
        return self.job_id


class JobExecution(models.Model):
    """The execution lease of a running ordinary (non-topic) job."""

    namespace = models.CharField(max_length=NAMESPACE_LENGTH)
    job_id = models.CharField(max_length=JOB_ID_LENGTH)
    owner = models.CharField(max_length=OWNER_LENGTH)
    epoch = models.BigIntegerField(default=1)
    started_at = models.DateTimeField()
    lease_expires_at = models.DateTimeField()

    class Meta:
        db_table = "later_job_execution"
        verbose_name = "job execution"
        constraints = [
            # fenced completion: WHERE namespace=? AND job_id=? AND owner=? AND epoch=?
            models.UniqueConstraint(
                fields=["namespace", "job_id"], name="later_execution_job_uniq"
            ),
        ]
        indexes = [
            # lease renewal by owner, and the dashboard's "running on worker X"
            models.Index(fields=["namespace", "owner"], name="later_execution_owner_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.job_id} on {self.owner}"
