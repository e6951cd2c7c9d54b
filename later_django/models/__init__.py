"""later_django's tables, one module per family."""

from .core import DeliveryCommand, JobExecution, StorageRangeMember, StorageValue
from .dashboard import (
    JobIndexRow,
    JobTransitionMetric,
    JobWaitMetric,
    QueueSample,
    StageCount,
    StageCountDelta,
)
from .log import LogConsumerLease, LogConsumerMember, LogConsumerOffset, LogPartition, LogRecord
from .schedules import Schedule
from .topics import PartitionHead, PartitionJob, PartitionLease, PartitionSequence, Topic, Worker

__all__ = [
    "DeliveryCommand",
    "JobExecution",
    "JobIndexRow",
    "JobTransitionMetric",
    "JobWaitMetric",
    "LogConsumerLease",
    "LogConsumerMember",
    "LogConsumerOffset",
    "LogPartition",
    "LogRecord",
    "PartitionHead",
    "PartitionJob",
    "PartitionLease",
    "PartitionSequence",
    "QueueSample",
    "Schedule",
    "StageCount",
    "StageCountDelta",
    "StorageRangeMember",
    "StorageValue",
    "Topic",
    "Worker",
]
