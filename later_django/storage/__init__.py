"""The storage layer: namespaced key-value state and ordered ranges in the later_* tables."""

from .maintenance import AutocommitRequired
from .operations import Delete, Expire, Operation, RangeAdd, RangeRemove, Set
from .reads import RangeItem, RangeOrder, RangePage
from .store import Storage
from .transient import is_transient

__all__ = [
    "AutocommitRequired",
    "Delete",
    "Expire",
    "Operation",
    "RangeAdd",
    "RangeItem",
    "RangeOrder",
    "RangePage",
    "RangeRemove",
    "Set",
    "Storage",
    "is_transient",
]
