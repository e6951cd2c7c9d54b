"""Backoff policies: names, dicts with parameters, callables, and their errors."""

from datetime import timedelta
from types import SimpleNamespace

import pytest

from later_django.backoff import (
    Exponential,
    ExponentialJitter,
    Fixed,
    Immediate,
    delay_seconds,
    resolve,
)
from later_django.exceptions import InvalidArgument
from tests.tasks import retry_only_value_errors

NAMES = "exponential, exponential_jitter, fixed, immediate"
FINITE = "it must be a finite number of seconds >= 0."


def after(attempts: int) -> SimpleNamespace:
    """A stand-in for the TaskResult a policy sees: one worker id per attempt so far."""
    return SimpleNamespace(worker_ids=[f"w{i}" for i in range(attempts)])


ERROR = RuntimeError("boom")


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("immediate", Immediate),
        ("fixed", Fixed),
        ("exponential", Exponential),
        ("exponential_jitter", ExponentialJitter),
    ],
)
def test_each_policy_name_resolves_to_its_policy(name, kind):
    assert type(resolve(name)) is kind


def test_immediate_retries_at_once():
    assert delay_seconds(resolve("immediate"), ERROR, after(3)) == 0.0


def test_fixed_waits_the_same_time_before_every_retry():
    policy = resolve({"policy": "fixed", "seconds": 2.5})
    assert [delay_seconds(policy, ERROR, after(n)) for n in (1, 2, 5)] == [2.5, 2.5, 2.5]


def test_exponential_doubles_from_its_base_up_to_its_maximum():
    policy = resolve({"policy": "exponential", "base": 0.5, "factor": 2, "maximum": 3})
    assert [delay_seconds(policy, ERROR, after(n)) for n in (1, 2, 3, 4, 10)] == [
        0.5,
        1.0,
        2.0,
        3.0,
        3.0,
    ]


def test_exponential_defaults_start_at_one_second():
    policy = resolve("exponential")
    assert [delay_seconds(policy, ERROR, after(n)) for n in (1, 2, 3)] == [1.0, 2.0, 4.0]


def test_exponential_jitter_stays_between_zero_and_the_exponential_delay():
    policy = resolve({"policy": "exponential_jitter", "base": 1, "factor": 3})
    delays = [delay_seconds(policy, ERROR, after(3)) for _ in range(200)]
    assert all(0 <= d <= 9.0 for d in delays)
    assert len(set(delays)) > 100  # really random, not a constant


def test_a_callable_policy_sees_the_exception_and_may_return_a_timedelta_or_none():
    policy = resolve(retry_only_value_errors)
    assert delay_seconds(policy, ValueError("x"), after(1)) == pytest.approx(0.1)
    assert delay_seconds(policy, TypeError("x"), after(1)) is None


def test_a_negative_delay_from_a_callable_means_at_once():
    assert delay_seconds(lambda exc, result: timedelta(seconds=-5), ERROR, after(1)) == 0.0
    assert delay_seconds(lambda exc, result: -1, ERROR, after(1)) == 0.0


def never(exception, task_result):
    return float("inf")


def test_an_infinite_or_nan_delay_from_a_callable_is_refused():
    with pytest.raises(InvalidArgument) as raised:
        delay_seconds(never, ERROR, after(1))
    assert str(raised.value) == (
        f"Backoff policy {never!r} returned inf; it must return a finite number of seconds, "
        "a timedelta or None."
    )
    with pytest.raises(InvalidArgument, match=r" returned nan; it must return a finite number"):
        delay_seconds(lambda exc, result: float("nan"), ERROR, after(1))


BAD = [
    ("linear", f"backoff is 'linear'; it must be one of {NAMES} or a callable."),
    ({"seconds": 1}, f"backoff policy is None; it must be one of {NAMES}."),
    ({"policy": "sometimes"}, f"backoff policy is 'sometimes'; it must be one of {NAMES}."),
    (
        {"policy": "immediate", "seconds": 1},
        "backoff parameters {'seconds': 1} do not fit 'immediate': ",
    ),
    ({"policy": "fixed", "seconds": -1}, f"Backoff seconds is -1; {FINITE}"),
    ({"policy": "fixed", "seconds": "5"}, f"Backoff seconds is '5'; {FINITE}"),
    ({"policy": "fixed", "seconds": float("nan")}, f"Backoff seconds is nan; {FINITE}"),
    ({"policy": "fixed", "seconds": float("inf")}, f"Backoff seconds is inf; {FINITE}"),
    (
        {"policy": "exponential", "factor": 0.5},
        "Backoff factor is 0.5; it must be a finite number >= 1.",
    ),
    (
        {"policy": "exponential", "factor": float("inf")},
        "Backoff factor is inf; it must be a finite number >= 1.",
    ),
    ({"policy": "exponential", "base": -1}, f"Backoff base is -1; {FINITE}"),
    ({"policy": "exponential", "base": float("nan")}, f"Backoff base is nan; {FINITE}"),
    ({"policy": "exponential", "maximum": float("inf")}, f"Backoff maximum is inf; {FINITE}"),
    (3, f"backoff is 3; it must be a policy name ({NAMES}), a dict with a 'policy' key, or a"),
]


@pytest.mark.parametrize(("value", "message"), BAD)
def test_a_bad_policy_is_refused_naming_the_value(value, message):
    with pytest.raises(InvalidArgument) as raised:
        resolve(value)
    assert str(raised.value).startswith(message)


def test_the_field_name_in_errors_can_be_chosen():
    with pytest.raises(InvalidArgument, match=r"^OPTIONS\['backoff'\] is 'x'; it must be one of"):
        resolve("x", field="OPTIONS['backoff']")
