"""Topics: per-key strict order through partitions with fenced leases.

``partition_for_key`` is the public routing function; the rest of the package
is the engine (see docs/topics.md).
"""

from .routing import partition_for_key

__all__ = ["partition_for_key"]
