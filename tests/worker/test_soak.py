"""The soak's short run: workers SIGKILLed as the jobs finish, and a PostgreSQL server restart.

Each test runs ``bench/soak.py``'s scenario on a throwaway database of the
suite's kind (its own tables, its own workers on ``bench.settings`` with a
2-second lease) and asserts what the soak counts: no job lost, no key's
order broken, and a bounded number of duplicate runs.

A killed worker's jobs run again elsewhere when they were running, and also
when they had finished but their outcomes were still waiting for the writer,
which stores them in batches while the slots go on: under load a kill can
re-run a few dozen finished jobs (16 to 31 seen after one kill, with 4
slots). A worker claims less once more than ``WRITER_SLACK`` outcomes wait,
so the test allows each kill the slots plus that slack; kills x slots alone
holds on average, not for every run on a busy machine.
"""

from __future__ import annotations

import os
import shutil

import pytest
from django.db import connection, connections

from bench.soak import parse_options, soak
from bench.soaking.db import order_violations
from later_django.worker.runner import WRITER_SLACK
from tests.conftest import wait_for

pytestmark = [pytest.mark.process, pytest.mark.soak]


# Half the short run's jobs, to stay within a minute on a busy machine. Three kills, as a
# quarter, a half and three quarters of the jobs have finished: killing every two seconds
# saw only two when the machine drained the jobs in under six.
SHORT_SIZES = ["--short", "--plain", "1500", "--ordered", "300"]
KILLED = ["--lease", "2", "--kills", "3"]
SHORT_RUN = [*SHORT_SIZES, *KILLED]
# Atomic jobs each commit their outcome alone, at about half the rate: half as many keep
# the run as long, with the same three kills, each cutting off up to the slots' jobs.
ATOMIC_RUN = ["--short", "--plain", "750", "--ordered", "150", *KILLED]


def test_workers_killed_as_jobs_finish_lose_no_job_and_keep_each_keys_order(soak_url):
    report = soak(soak_url, parse_options(SHORT_RUN))

    assert report.kills == 3, report.rows()
    assert not report.stalled, report.rows()
    assert report.lost == 0, report.rows()
    assert report.order_violations == 0, report.rows()
    assert report.duplicates <= report.kills * (report.concurrency + WRITER_SLACK), report.rows()


def test_atomic_jobs_under_kills_leave_each_effect_exactly_once(soak_url):
    """Each run's row commits with its outcome: a killed run leaves none, so however many
    runs a kill cut off and started again, every job's row is there exactly once."""
    report = soak(soak_url, parse_options([*ATOMIC_RUN, "--atomic"]))

    assert report.kills == 3, report.rows()
    assert not report.stalled, report.rows()
    assert report.lost == 0, report.rows()
    assert report.order_violations == 0, report.rows()
    assert report.duplicates == 0, report.rows()


def test_the_order_check_sees_overlaps_and_reruns_after_a_successor():
    in_order = [("k", 0, 0.0, 1.0), ("k", 0, 2.0, 3.0), ("k", 1, 3.0, 4.0), ("j", 0, 0.5, 2.0)]
    overlap = [("k", 0, 0.0, 2.0), ("k", 1, 1.0, 3.0)]
    rerun_after_successor = [("k", 0, 0.0, 1.0), ("k", 1, 1.0, 2.0), ("k", 0, 2.0, 3.0)]
    skipped_back = [("k", 2, 0.0, 1.0), ("k", 1, 1.0, 2.0)]

    assert order_violations(sorted(in_order)) == 0
    assert order_violations(overlap) == 1
    assert order_violations(rerun_after_successor) == 1
    assert order_violations(skipped_back) == 1


def pg_ctlcluster_missing() -> str:
    if connection.vendor != "postgresql":
        return "PostgreSQL only"
    if shutil.which("pg_ctlcluster") is None or not os.path.isdir("/etc/postgresql"):
        return "pg_ctlcluster is not available to restart the PostgreSQL server"
    if connection.settings_dict["HOST"] not in ("", "127.0.0.1", "localhost", "::1"):
        return "the PostgreSQL server is not on this host, so pg_ctlcluster cannot restart it"
    return ""


@pytest.mark.skipif(bool(pg_ctlcluster_missing()), reason=pg_ctlcluster_missing() or "-")
@pytest.mark.django_db(transaction=True)
def test_workers_recover_from_a_postgresql_restart_on_their_own(soak_url):
    # No kills: the workers that finish the jobs are the ones the restart cut off.
    # The restart comes as half the jobs have finished.
    options = [*SHORT_SIZES, "--lease", "2", "--kill-every", "3600", "--restart-postgres"]
    try:
        report = soak(soak_url, parse_options(options))
    finally:
        # The restart ended this process's sessions too: wait for the server, reconnect.
        connections.close_all()

        def answers() -> bool:
            """the PostgreSQL server accepts connections again"""
            try:
                connection.ensure_connection()
            except Exception:  # noqa: BLE001  (refused while it starts)
                connections.close_all()
                return False
            return True

        wait_for(answers, timeout=60, step=0.5)

    assert report.restart_seconds is not None, report.rows()
    assert not report.stalled, report.rows()
    assert report.lost == 0, report.rows()
    assert report.order_violations == 0, report.rows()
    assert report.kills == 0
    assert report.duplicates <= report.workers * (report.concurrency + WRITER_SLACK), report.rows()
