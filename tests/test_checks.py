"""System checks: later.E001 for LATER_* settings, later.E002-E004/W001/W002 for backend aliases."""

from typing import Any

import pytest
from django.db import connection
from django.test import override_settings

from later_django.checks import check_later_settings, check_postgres_driver
from later_django.tasks_api import check_tasks, task_backends

BACKEND = "later_django.backend.LaterBackend"
FROM_1 = "it must be a number of seconds from 1 to 3155760000 (100 years)."
FROM_0 = "it must be a number of seconds from 0 to 3155760000 (100 years)."
OPTIONS_HINT = "See docs/configuration.md for every option, its type and default."


def run_checks() -> list[Any]:
    """The two registered checks later_django's messages come from (no model checks)."""
    return [*check_tasks(), *check_later_settings()]


def later_messages() -> list[tuple[str, str]]:
    return [(m.id, m.msg) for m in run_checks() if m.id and m.id.startswith("later.")]


def tasks_with(options: dict[str, Any]) -> dict[str, Any]:
    return {"default": {"BACKEND": BACKEND, "OPTIONS": options}}


def test_the_test_settings_pass_every_later_check():
    assert later_messages() == []


BAD_OPTIONS = [
    ({"namespace": ""}, "OPTIONS['namespace'] is ''; it must be 1-100 characters of letters"),
    ({"namespace": "a b"}, "OPTIONS['namespace'] is 'a b'; it must be 1-100 characters"),
    (
        {"lease_seconds": 0},
        "OPTIONS['lease_seconds'] is 0; " + FROM_1,
    ),
    (
        {"lease_seconds": "30"},
        "OPTIONS['lease_seconds'] is '30'; " + FROM_1,
    ),
    (
        {"lease_seconds": True},
        "OPTIONS['lease_seconds'] is True; " + FROM_1,
    ),
    (
        {"lease_seconds": float("nan")},
        "OPTIONS['lease_seconds'] is nan; " + FROM_1,
    ),
    (
        {"retention_seconds": -1},
        "OPTIONS['retention_seconds'] is -1; " + FROM_0,
    ),
    (
        {"retention_seconds": float("inf")},
        "OPTIONS['retention_seconds'] is inf; " + FROM_0,
    ),
    (
        {"retention_seconds": 1e12},
        "OPTIONS['retention_seconds'] is 1000000000000.0; it must be a number of seconds from 0 "
        "to 3155760000 (100 years).",
    ),
    ({"max_attempts": 0}, "OPTIONS['max_attempts'] is 0; it must be a whole number >= 1."),
    ({"max_attempts": 2.5}, "OPTIONS['max_attempts'] is 2.5; it must be a whole number >= 1."),
    (
        {"backoff": "linear"},
        "OPTIONS['backoff'] is 'linear'; it must be one of exponential, exponential_jitter, "
        "fixed, immediate or a callable.",
    ),
    (
        {"backoff": {"policy": "fixed", "seconds": -2}},
        "Backoff seconds is -2; it must be a finite number of seconds >= 0.",
    ),
    (
        {"backoff": {"policy": "exponential", "maximum": float("inf")}},
        "Backoff maximum is inf; it must be a finite number of seconds >= 0.",
    ),
    (
        {"lease_seconds": float("inf")},
        "OPTIONS['lease_seconds'] is inf; " + FROM_1,
    ),
    (
        {"retention_seconds": float("nan")},
        "OPTIONS['retention_seconds'] is nan; " + FROM_0,
    ),
    (
        {"backoff": {"policy": "fixed", "minutes": 2}},
        "OPTIONS['backoff'] parameters {'minutes': 2} do not fit 'fixed'",
    ),
    ({"backoff": 5}, "OPTIONS['backoff'] is 5; it must be a policy name"),
    ({"lease": 30}, "OPTIONS has unknown key 'lease'; allowed keys are backoff, database"),
    ({"database": ""}, "OPTIONS['database'] is ''; it must be a DATABASES alias."),
    (
        {"topics": {"orders": {"partitions": 8, "keep_last": 0}}},
        "OPTIONS['topics']['orders']['keep_last'] is 0; it must be a whole number >= 1 "
        "(finished jobs kept per partition), or None to keep them all.",
    ),
    (
        {"topics": {"orders": {"partitions": 8, "keep_last": 2.5}}},
        "OPTIONS['topics']['orders']['keep_last'] is 2.5; it must be a whole number >= 1",
    ),
    (
        {"topics": {"orders": {"partitions": 8, "keep_last": True}}},
        "OPTIONS['topics']['orders']['keep_last'] is True; it must be a whole number >= 1",
    ),
    (
        {"topics": {"orders": {"partitions": 0, "keep_last": 5}}},
        "OPTIONS['topics']['orders']['partitions'] is 0; it must be a whole number of "
        "partitions from 1 to 4096.",
    ),
    (
        {"topics": {"orders": {"keep_last": 5}}},
        "OPTIONS['topics']['orders'] is {'keep_last': 5}; a topic's dict takes 'partitions' "
        "(required), 'keep_last', 'log_compact' and 'log_retention'.",
    ),
    (
        {"topics": {"events": {"partitions": 4, "log_compact": "yes"}}},
        "OPTIONS['topics']['events']['log_compact'] is 'yes'; it must be True (workers keep "
        "only the newest record of each key below every group's offset) or False.",
    ),
    (
        {"topics": {"events": {"partitions": 4, "log_retention": -1}}},
        "OPTIONS['topics']['events']['log_retention'] is -1; it must be a number of seconds "
        "from 0 to",
    ),
    (
        {"topics": {"events": {"partitions": 4, "log_retention": float("nan")}}},
        "OPTIONS['topics']['events']['log_retention'] is nan; it must be a number of seconds",
    ),
    (
        {"topics": {"orders": {"partitions": 8, "keep": 5}}},
        "OPTIONS['topics']['orders'] is {'partitions': 8, 'keep': 5}; a topic's dict takes",
    ),
    (
        {"topics": {"orders": 0}},
        "OPTIONS['topics']['orders'] is 0; it must be a whole number of partitions from 1 to 4096.",
    ),
]


@pytest.mark.parametrize(("options", "message"), BAD_OPTIONS)
def test_a_bad_backend_option_is_error_e002_naming_the_value(options, message):
    with override_settings(TASKS=tasks_with(options)):
        errors = [m for m in run_checks() if m.id == "later.E002"]
    assert len(errors) == 1
    assert errors[0].msg.startswith(f"TASKS['default']: {message}")
    assert errors[0].hint == OPTIONS_HINT


def test_backend_check_reports_the_same_error_directly():
    with override_settings(TASKS=tasks_with({"max_attempts": -3})):
        messages = task_backends["default"].check()
    assert [(m.id, m.msg) for m in messages] == [
        (
            "later.E002",
            "TASKS['default']: OPTIONS['max_attempts'] is -3; it must be a whole number >= 1.",
        )
    ]


def test_every_documented_option_is_accepted():
    options = {
        "namespace": "shop.eu:1",
        "lease_seconds": 10,
        "max_attempts": 5,
        "backoff": {"policy": "exponential_jitter", "base": 0.5, "maximum": 60},
        "retention_seconds": 0,
        "database": "default",
    }
    with override_settings(TASKS=tasks_with(options)):
        assert later_messages() == []
        later = task_backends["default"].later
    assert later.namespace == "shop.eu:1"
    assert later.lease_seconds == 10.0
    assert later.max_attempts == 5
    assert later.retention_seconds == 0.0


def test_a_topic_takes_a_partition_count_or_a_dict_with_keep_last():
    topics = {
        "orders": {"partitions": 8, "keep_last": 1000},
        "events": 4,
        "audit": {"partitions": 2, "keep_last": None},
    }
    with override_settings(TASKS=tasks_with({"topics": topics})):
        assert later_messages() == []
        later = task_backends["default"].later
    assert later.topics == {"orders": 8, "events": 4, "audit": 2}
    assert later.keep_last == {"orders": 1000}


def test_options_default_to_the_documented_values():
    with override_settings(TASKS=tasks_with({})):
        later = task_backends["default"].later
    assert later.namespace == "default"
    assert later.lease_seconds == 30.0
    assert later.max_attempts == 1
    assert type(later.backoff).__name__ == "Exponential"
    assert later.retention_seconds == 7 * 86400.0


def test_an_unknown_database_alias_is_error_e003():
    with override_settings(TASKS=tasks_with({"database": "replica"})):
        assert later_messages() == [
            (
                "later.E003",
                "TASKS['default']['OPTIONS']['database'] is 'replica', which is not a "
                "DATABASES alias.",
            )
        ]


def test_sqlite_without_immediate_transactions_is_warning_w001(vendor, monkeypatch):
    if vendor != "sqlite":
        pytest.skip("SQLite only")
    monkeypatch.setitem(connection.settings_dict, "OPTIONS", {"timeout": 30})
    messages = task_backends["default"].check()
    assert [m.id for m in messages] == ["later.W001"]
    assert "uses transaction_mode None" in messages[0].msg


BAD_SETTINGS = [
    (
        "LATER_POLL_INTERVAL",
        "1",
        "LATER_POLL_INTERVAL is '1'; it must be a finite number of at least",
    ),
    (
        "LATER_POLL_INTERVAL",
        0,
        "LATER_POLL_INTERVAL is 0; it must be a finite number of at least 0.01.",
    ),
    (
        "LATER_HEARTBEAT_INTERVAL",
        True,
        "LATER_HEARTBEAT_INTERVAL is True; it must be a finite number of at least 0.1.",
    ),
    ("LATER_SWEEP_BATCH", 2.5, "LATER_SWEEP_BATCH is 2.5; it must be int of at least 1."),
    (
        "LATER_VACUUM_INTERVAL",
        0.5,
        "LATER_VACUUM_INTERVAL is 0.5; it must be None or a finite number of at least 1.0.",
    ),
    (
        "LATER_WORKER_DEAD_AFTER",
        0.5,
        "LATER_WORKER_DEAD_AFTER is 0.5; it must be a finite number of at least 1.0.",
    ),
    (
        "LATER_SWEEP_INTERVAL",
        None,
        "LATER_SWEEP_INTERVAL is None; it must be a finite number of at least 0.1.",
    ),
    (
        "LATER_POLL_INTERVAL",
        float("nan"),
        "LATER_POLL_INTERVAL is nan; it must be a finite number of at least 0.01.",
    ),
    (
        "LATER_HEARTBEAT_INTERVAL",
        float("inf"),
        "LATER_HEARTBEAT_INTERVAL is inf; it must be a finite number of at least 0.1.",
    ),
    (
        "LATER_WORKER_DEAD_AFTER",
        float("nan"),
        "LATER_WORKER_DEAD_AFTER is nan; it must be a finite number of at least 1.0.",
    ),
    (
        "LATER_SWEEP_INTERVAL",
        float("inf"),
        "LATER_SWEEP_INTERVAL is inf; it must be a finite number of at least 0.1.",
    ),
    (
        "LATER_VACUUM_INTERVAL",
        float("inf"),
        "LATER_VACUUM_INTERVAL is inf; it must be None or a finite number of at least 1.0.",
    ),
    (
        "LATER_PREPARED_STATEMENTS",
        "no",
        "LATER_PREPARED_STATEMENTS is 'no'; it must be bool.",
    ),
    (
        "LATER_LIMIT_IDLE_TRANSACTIONS",
        1,
        "LATER_LIMIT_IDLE_TRANSACTIONS is 1; it must be bool.",
    ),
    (
        "LATER_METRICS_TOKEN",
        "",
        "LATER_METRICS_TOKEN is ''; it must be None or a non-empty string.",
    ),
    (
        "LATER_METRICS_TOKEN",
        b"secret",
        "LATER_METRICS_TOKEN is b'secret'; it must be None or a non-empty string.",
    ),
    (
        "LATER_ADMIN_INTERNAL_TABLES",
        "yes",
        "LATER_ADMIN_INTERNAL_TABLES is 'yes'; it must be bool.",
    ),
]


@pytest.mark.parametrize(("name", "value", "message"), BAD_SETTINGS)
def test_a_bad_later_setting_is_error_e001_naming_the_value(name, value, message):
    with override_settings(**{name: value}):
        errors = [m for m in run_checks() if m.id == "later.E001"]
    assert len(errors) == 1
    assert errors[0].msg.startswith(message)
    assert errors[0].hint


def test_false_is_a_valid_prepared_statements_setting():
    with override_settings(LATER_PREPARED_STATEMENTS=False):
        assert later_messages() == []


def test_a_metrics_token_string_is_valid():
    with override_settings(LATER_METRICS_TOKEN="s3cret"):
        assert later_messages() == []


def test_none_is_a_valid_vacuum_interval():
    with override_settings(LATER_VACUUM_INTERVAL=None):
        assert later_messages() == []


def test_a_heartbeat_longer_than_a_third_of_the_lease_is_warning_w002():
    with override_settings(TASKS=tasks_with({"lease_seconds": 3}), LATER_HEARTBEAT_INTERVAL=5):
        messages = [m for m in run_checks() if m.id == "later.W002"]
    assert [m.msg for m in messages] == [
        "LATER_HEARTBEAT_INTERVAL is 5, more than a third of "
        "TASKS['default']['OPTIONS']['lease_seconds'] (3); workers of 'default' renew their "
        "leases every 1 seconds instead."
    ]
    assert messages[0].hint == (
        "Set LATER_HEARTBEAT_INTERVAL to at most 1, or lease_seconds to at least 15, so both "
        "say the same."
    )


def test_a_heartbeat_of_a_third_of_the_lease_passes_every_later_check():
    with override_settings(TASKS=tasks_with({"lease_seconds": 3}), LATER_HEARTBEAT_INTERVAL=1):
        assert later_messages() == []


def test_postgresql_through_psycopg2_is_error_e005():
    [error] = check_postgres_driver("default", "psycopg2")
    assert error.id == "later.E005"
    assert error.msg == (
        "Database 'default' is PostgreSQL through 'psycopg2'; later_django needs psycopg 3 "
        "(pip install later-django[postgres])."
    )


def test_postgresql_through_psycopg_3_passes():
    assert check_postgres_driver("default", "psycopg") == []


def test_the_real_connection_passes_the_driver_check(vendor):
    # On PostgreSQL this runs check_postgres_driver on the driver Django really uses.
    messages = task_backends["default"].check()
    assert "later.E005" not in [m.id for m in messages]
    if vendor == "postgresql":
        assert connection.Database.__name__ == "psycopg"
