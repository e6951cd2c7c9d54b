"""Topics: per-key strict order through partitions with fenced leases.

``partition_for_key`` is the public routing function; the rest of the package
is the engine (see docs/topics.md).
"""

from .routing import partition_for_key

__all__ = ["SCHEDULES_TOPIC", "partition_for_key"]

# The reserved topic whose partitions, keyed by schedule identifier, keep the
# occurrences of a sequential schedule (and their continuations) in order.
SCHEDULES_TOPIC = "later.schedules"
