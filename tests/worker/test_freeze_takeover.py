"""Frozen workers (SIGSTOP) hand their work over within a lease: the soak's freeze mode.

Five times, a random worker of three is stopped while it runs jobs; the test
times until other workers hold every job it held and every partition it
leased that has a head, then lets it go on. On SQLite a worker stopped
inside one of its own write transactions keeps the database's one write lock
and holds every writer up until it wakes (docs/worker.md, "When a worker
freezes"); those freezes are undone and tried again, since no takeover is
possible then.
"""

from __future__ import annotations

import pytest
from django.db import connection

from bench.soak import parse_options
from bench.soaking.freeze import freeze

pytestmark = [pytest.mark.process, pytest.mark.soak]


def test_a_frozen_workers_jobs_and_partitions_are_taken_over_within_a_lease(soak_url):
    options = parse_options(["--freeze", "5", "--lease", "2"])
    report = freeze(soak_url, options, outside_write_lock=connection.vendor == "sqlite")

    # The whole report, worker logs' folder included, as text: pytest would cut a dict short.
    rows = "\n".join(f"{name}: {value}" for name, value in report.rows().items())
    assert len(report.times) == 5, rows
    assert report.jobs_held + report.partitions_held >= 5, rows
    assert report.late == [], rows
    assert report.lost == 0, rows
