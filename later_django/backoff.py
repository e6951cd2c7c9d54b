"""Retry backoff policies: how long a failed job waits before its next attempt.

A policy is any callable ``policy(exception, task_result) -> seconds | None``
(the shape of Django's retry proposal, new-features#142): it returns the delay
before the next attempt as seconds or a ``timedelta``, or ``None`` to stop
retrying. The built-in policies below look only at the attempt number.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Protocol

from .exceptions import InvalidArgument


class BackoffPolicy(Protocol):
    def __call__(self, exception: BaseException, task_result: Any) -> float | timedelta | None: ...


def _attempt(task_result: Any) -> int:
    return max(1, len(getattr(task_result, "worker_ids", ())))


def _at_least(name: str, value: float, minimum: float, unit: str = " of seconds") -> float:
    # inf and nan are floats too: an endless or undefined delay never schedules a retry.
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value < minimum
    ):
        raise InvalidArgument(
            f"Backoff {name} is {value!r}; it must be a finite number{unit} >= {minimum:g}."
        )
    return float(value)


@dataclass(frozen=True)
class Immediate:
    """Retry at once."""

    def __call__(self, exception: BaseException, task_result: Any) -> float:
        return 0.0


@dataclass(frozen=True)
class Fixed:
    """Wait the same number of seconds before every retry."""

    seconds: float = 10.0

    def __post_init__(self) -> None:
        _at_least("seconds", self.seconds, 0)

    def __call__(self, exception: BaseException, task_result: Any) -> float:
        return float(self.seconds)


@dataclass(frozen=True)
class Exponential:
    """Wait ``base * factor ** (attempt - 1)`` seconds, capped at ``maximum``."""

    base: float = 1.0
    factor: float = 2.0
    maximum: float = 3600.0

    def __post_init__(self) -> None:
        _at_least("base", self.base, 0)
        _at_least("maximum", self.maximum, 0)
        _at_least("factor", self.factor, 1, unit="")

    def delay(self, attempt: int) -> float:
        return float(min(self.maximum, self.base * self.factor ** (attempt - 1)))

    def __call__(self, exception: BaseException, task_result: Any) -> float:
        return self.delay(_attempt(task_result))


@dataclass(frozen=True)
class ExponentialJitter(Exponential):
    """Exponential backoff with "full jitter": a random delay up to the exponential one."""

    def __call__(self, exception: BaseException, task_result: Any) -> float:
        return random.uniform(0, self.delay(_attempt(task_result)))


NAMED = {
    "immediate": Immediate,
    "fixed": Fixed,
    "exponential": Exponential,
    "exponential_jitter": ExponentialJitter,
}


def resolve(value: Any, *, field: str = "backoff") -> BackoffPolicy:
    """Turn a policy name, ``{"policy": name, ...params}`` dict or callable into a policy."""
    if isinstance(value, str):
        if value not in NAMED:
            raise InvalidArgument(
                f"{field} is {value!r}; it must be one of {', '.join(sorted(NAMED))} or a callable."
            )
        return NAMED[value]()
    if isinstance(value, dict):
        params = dict(value)
        name = params.pop("policy", None)
        if name not in NAMED:
            raise InvalidArgument(
                f"{field} policy is {name!r}; it must be one of {', '.join(sorted(NAMED))}."
            )
        try:
            return NAMED[name](**params)
        except TypeError as e:
            raise InvalidArgument(f"{field} parameters {params!r} do not fit {name!r}: {e}.") from e
    if callable(value):
        return value
    raise InvalidArgument(
        f"{field} is {value!r}; it must be a policy name ({', '.join(sorted(NAMED))}), "
        "a dict with a 'policy' key, or a callable."
    )


def delay_seconds(
    policy: BackoffPolicy, exception: BaseException, task_result: Any
) -> float | None:
    """Ask a policy for the next delay in seconds; ``None`` means do not retry."""
    value = policy(exception, task_result)
    if value is None:
        return None
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not math.isfinite(seconds):
        raise InvalidArgument(
            f"Backoff policy {policy!r} returned {value!r}; it must return a finite number of "
            "seconds, a timedelta or None."
        )
    return max(0.0, seconds)
