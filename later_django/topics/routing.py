"""Which partition a key belongs to: a stable hash, the same in every process and release."""

from __future__ import annotations

import hashlib

from ..exceptions import InvalidArgument

KEY_MAX_LENGTH = 255


def check_key(key: object) -> str:
    """Return ``key`` if it is a usable partition key, or raise InvalidArgument."""
    if not isinstance(key, str) or not key or len(key) > KEY_MAX_LENGTH:
        raise InvalidArgument(
            f"partition_key is {key!r}; it must be a non-empty string of at most "
            f"{KEY_MAX_LENGTH} characters (use str(order.pk) for a number)."
        )
    return key


def partition_for_key(key: str, partition_count: int) -> int:
    """Return the partition of ``key`` in a topic of ``partition_count`` partitions.

    The partition is the first 8 bytes of the BLAKE2b digest of the key's UTF-8
    bytes, read as a big-endian unsigned integer, modulo ``partition_count``.
    Unlike the built-in ``hash()``, which is salted per process, it is the same
    in every process, machine and Python version, so every producer routes a
    key to the same partition. This function is public and will not change.

    Raises InvalidArgument for an empty or non-string key or a count outside
    1..4096.
    """
    check_key(key)
    if (
        isinstance(partition_count, bool)
        or not isinstance(partition_count, int)
        or not 1 <= partition_count <= 4096
    ):
        raise InvalidArgument(
            f"partition_count is {partition_count!r}; it must be a whole number from 1 to 4096."
        )
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % partition_count
