"""What an ordered task's code learns about its partition: the context's extra fields."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..context import LaterTaskContext

if TYPE_CHECKING:
    from ..tasks_api import TaskResult


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionTaskContext(LaterTaskContext):  # type: ignore[misc]
    """The TaskContext of a job run as its partition's head.

    ``epoch`` is the partition lease's fencing epoch for this run: it rises
    every time the partition is claimed, so a handler can fence its own writes
    with it (store it beside the data and refuse a write carrying a lower one;
    see docs/topics.md). ``sequence`` is the job's place in its partition.
    """

    topic: str
    partition: int
    partition_key: str | None
    sequence: int
    epoch: int


def context_for(item: Any, result: TaskResult) -> LaterTaskContext:
    """A PartitionTaskContext for a claimed head, a LaterTaskContext for anything else.

    Both read the claimed job's cancel flag, which the worker sets.
    """
    from .claiming import PartitionClaimed

    if not isinstance(item, PartitionClaimed):
        return LaterTaskContext(task_result=result, _cancelled=item.cancel)
    return PartitionTaskContext(
        task_result=result,
        _cancelled=item.cancel,
        topic=item.topic,
        partition=item.partition,
        partition_key=item.record.partition_key if item.record else None,
        sequence=item.sequence,
        epoch=item.epoch,
    )
