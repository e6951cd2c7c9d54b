"""The retained log: immutable keyed records on topic partitions, replayed by consumer groups.

Import from here::

    from later_django.log import Consumer, append, read
"""

from .compaction import boundaries, cleanup, compact
from .groups import Consumer, committed_offsets
from .records import Record, append, append_many, read

__all__ = [
    "Consumer",
    "Record",
    "append",
    "append_many",
    "boundaries",
    "cleanup",
    "committed_offsets",
    "compact",
    "read",
]
