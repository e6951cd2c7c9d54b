"""later_django's tables, one module per family."""

from .core import DeliveryCommand, JobExecution, StorageRangeMember, StorageValue
from .dashboard import (
    LIVE_STAGES,
    TERMINAL_STAGES,
    JobIndexRow,
    JobTransitionMetric,
    JobWaitMetric,
    QueueSample,
    Stage,
    StageCount,
    StageCountDelta,
)
from .log import LogConsumerLease, LogConsumerMember, LogConsumerOffset, LogPartition, LogRecord
from .schedules import Schedule
from .topics import PartitionHead, PartitionJob, PartitionLease, PartitionSequence, Topic, Worker

__all__ = [
    "LIVE_STAGES",
    "TERMINAL_STAGES",
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
    "Stage",
    "StageCount",
    "StageCountDelta",
    "StorageRangeMember",
    "StorageValue",
    "Topic",
    "Worker",
]
