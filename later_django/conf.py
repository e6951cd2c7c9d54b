"""Process-wide ``LATER_*`` settings, read live so ``override_settings`` works.

Options that belong to one task backend alias (namespace, topics, retry policy,
lease length, retention) live in ``TASKS[alias]["OPTIONS"]`` instead; see
``later_django.options``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed
from django.dispatch import receiver


@dataclass(frozen=True)
class Setting:
    name: str
    default: Any
    kind: type | tuple[type, ...]
    minimum: float | None
    help: str


SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in [
        Setting(
            "LATER_POLL_INTERVAL",
            1.0,
            (int, float),
            0.01,
            "Seconds an idle worker waits before looking for work again.",
        ),
        Setting(
            "LATER_HEARTBEAT_INTERVAL",
            5.0,
            (int, float),
            0.1,
            "Seconds between a worker's heartbeats and lease renewals.",
        ),
        Setting(
            "LATER_WORKER_DEAD_AFTER",
            30.0,
            (int, float),
            1.0,
            "Seconds without a heartbeat after which a worker counts as gone.",
        ),
        Setting(
            "LATER_SWEEP_INTERVAL",
            60.0,
            (int, float),
            0.1,
            "Seconds between sweeps of expired rows.",
        ),
        Setting("LATER_SWEEP_BATCH", 1000, int, 1, "Most rows one sweep statement deletes."),
        Setting(
            "LATER_CANCEL_GRACE",
            10.0,
            (int, float),
            0.0,
            "Seconds a running job whose cancel reached its worker has to stop by itself "
            "before the worker interrupts it.",
        ),
        Setting(
            "LATER_VACUUM_INTERVAL",
            None,
            (int, float, type(None)),
            1.0,
            "Seconds between VACUUMs of the database; None never vacuums.",
        ),
        Setting(
            "LATER_PREPARED_STATEMENTS",
            True,
            bool,
            None,
            "Whether the engine's hot PostgreSQL statements are prepared once per connection. "
            "Set False behind a transaction-pooling PgBouncer older than 1.21.",
        ),
        Setting(
            "LATER_LIMIT_IDLE_TRANSACTIONS",
            True,
            bool,
            None,
            "PostgreSQL: whether a worker's own sessions end a transaction left idle for a "
            "lease (a frozen worker's). Set False behind a transaction-pooling proxy, where a "
            "session setting would reach other clients.",
        ),
        Setting(
            "LATER_METRICS_TOKEN",
            None,
            (str, type(None)),
            None,
            "Bearer token that opens the Prometheus metrics view to a scraper; None lets only "
            "staff users in.",
        ),
        Setting(
            "LATER_ADMIN_INTERNAL_TABLES",
            False,
            bool,
            None,
            "Whether the admin index lists the engine's internal tables (delivery queue, "
            "leases, topics, workers, the retained log) beside the dashboard and jobs.",
        ),
        Setting(
            "LATER_REDACT",
            None,
            (str, type(None)),
            None,
            "Dotted path of a callable redact(task_path, args, kwargs) -> (args, kwargs) that the "
            "dashboard and admin call before showing a job's or schedule's arguments; None shows "
            "them as stored.",
        ),
    ]
}


class LaterSettings:
    """Typed view of the ``LATER_*`` settings, each read once until a setting changes.

    Reading a setting that is not set costs Django an AttributeError each time,
    and the enqueue path reads one per call; Django's ``setting_changed`` (sent
    by ``override_settings`` and the test client's settings fixture) empties the
    cache.
    """

    def __init__(self) -> None:
        self._values: dict[str, Any] = {}

    def _get(self, name: str) -> Any:
        try:
            return self._values[name]
        except KeyError:
            value = self._values[name] = getattr(django_settings, name, SETTINGS[name].default)
            return value

    def forget(self) -> None:
        self._values.clear()

    @property
    def poll_interval(self) -> float:
        return float(self._get("LATER_POLL_INTERVAL"))

    @property
    def heartbeat_interval(self) -> float:
        return float(self._get("LATER_HEARTBEAT_INTERVAL"))

    @property
    def worker_dead_after(self) -> float:
        return float(self._get("LATER_WORKER_DEAD_AFTER"))

    @property
    def sweep_interval(self) -> float:
        return float(self._get("LATER_SWEEP_INTERVAL"))

    @property
    def sweep_batch(self) -> int:
        return int(self._get("LATER_SWEEP_BATCH"))

    @property
    def cancel_grace(self) -> float:
        return float(self._get("LATER_CANCEL_GRACE"))

    @property
    def vacuum_interval(self) -> float | None:
        value = self._get("LATER_VACUUM_INTERVAL")
        return None if value is None else float(value)

    @property
    def prepared_statements(self) -> bool:
        return bool(self._get("LATER_PREPARED_STATEMENTS"))

    @property
    def limit_idle_transactions(self) -> bool:
        return bool(self._get("LATER_LIMIT_IDLE_TRANSACTIONS"))

    @property
    def metrics_token(self) -> str | None:
        value = self._get("LATER_METRICS_TOKEN")
        return value if isinstance(value, str) and value else None

    @property
    def admin_internal_tables(self) -> bool:
        return bool(self._get("LATER_ADMIN_INTERNAL_TABLES"))

    @property
    def redact(self) -> str | None:
        value = self._get("LATER_REDACT")
        return value if isinstance(value, str) and value else None


later_settings = LaterSettings()


@receiver(setting_changed)
def _setting_changed(*, setting: str, **kwargs: Any) -> None:
    if setting.startswith("LATER_"):
        later_settings.forget()


# Leases are renewed at least this many times per lease, so one late or failed
# renewal (a retried statement, a busy database) still leaves time for the next.
RENEWALS_PER_LEASE = 3


def renewal_interval(heartbeat_interval: float, lease_seconds: float) -> float:
    """Seconds between renewals: the heartbeat interval, or a third of the lease if shorter."""
    return min(heartbeat_interval, lease_seconds / RENEWALS_PER_LEASE)
