"""Per-minute transition and queue-wait counters, gathered in memory and flushed in batches."""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime

from ..db import connection_for, to_db, write_transaction
from ..sql import dialect

# Upper bounds (ms) of the queue-wait histogram bins; the last bin is open-ended.
WAIT_BINS_MS = (
    1,
    2,
    5,
    10,
    25,
    50,
    100,
    250,
    500,
    1000,
    2500,
    5000,
    10000,
    30000,
    60000,
    300000,
    3600000,
    86400000,
)
OPEN_BIN_MS = 2**62


def minute(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def wait_bin(wait_ms: float) -> int:
    for bound in WAIT_BINS_MS:
        if wait_ms <= bound:
            return bound
    return OPEN_BIN_MS


class MetricsBatch:
    """Thread-safe counters waiting to be added to the metric tables."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._transitions: Counter[tuple[str, datetime]] = Counter()
        self._waits: Counter[tuple[str, datetime, int]] = Counter()

    def transition(self, stage: str, at: datetime, count: int = 1) -> None:
        with self._lock:
            self._transitions[(stage, minute(at))] += count

    def transitions(self, stages: Counter[str], at: datetime) -> None:
        """Count many transitions at once (``stages``: how many reached each stage)."""
        bucket = minute(at)
        with self._lock:
            for stage, count in stages.items():
                self._transitions[(stage, bucket)] += count

    def waits(self, waited: Counter[tuple[str, int]], at: datetime) -> None:
        """Count many waits at once (``waited``: how many of each mode fell in each bin)."""
        bucket = minute(at)
        with self._lock:
            for (mode, bound), count in waited.items():
                self._waits[(mode, bucket, bound)] += count

    def flush(self, namespace: str, *, using: str) -> int:
        """Add the gathered counts to the tables; return how many rows were touched."""
        with self._lock:
            transitions, self._transitions = self._transitions, Counter()
            waits, self._waits = self._waits, Counter()
        if not transitions and not waits:
            return 0
        connection = connection_for(using)
        try:
            with write_transaction(using) as cursor:
                if transitions:
                    dialect(cursor.db).execute_each(
                        cursor,
                        "INSERT INTO later_job_transition_metrics "
                        "(namespace, stage, bucket, count) VALUES (%s, %s, %s, %s) "
                        "ON CONFLICT (namespace, stage, bucket) "
                        "DO UPDATE SET count = later_job_transition_metrics.count + excluded.count",
                        [
                            (namespace, stage, to_db(connection, bucket), count)
                            for (stage, bucket), count in sorted(transitions.items())
                        ],
                    )
                if waits:
                    dialect(cursor.db).execute_each(
                        cursor,
                        "INSERT INTO later_job_wait_metrics "
                        "(namespace, mode, bucket, le_ms, count) VALUES (%s, %s, %s, %s, %s) "
                        "ON CONFLICT (namespace, mode, bucket, le_ms) "
                        "DO UPDATE SET count = later_job_wait_metrics.count + excluded.count",
                        [
                            (namespace, mode, to_db(connection, bucket), le_ms, count)
                            for (mode, bucket, le_ms), count in sorted(waits.items())
                        ],
                    )
        except BaseException:
            with self._lock:
                self._transitions.update(transitions)
                self._waits.update(waits)
            raise
        return len(transitions) + len(waits)
