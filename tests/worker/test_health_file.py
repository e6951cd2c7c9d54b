"""``later_worker --health-file``: a file whose time says the last heartbeat was stored."""

import subprocess
import sys

import pytest

from tests.conftest import ROOT, wait_for, worker_env

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.process]


def test_the_health_file_is_created_and_touched_at_each_heartbeat(start_worker, tmp_path):
    path = tmp_path / "alive"
    start_worker("--health-file", str(path))  # heartbeats every 0.5 s in the tests
    wait_for(path.exists)
    first = path.stat().st_mtime_ns
    wait_for(lambda: path.stat().st_mtime_ns > first)
    second = path.stat().st_mtime_ns
    wait_for(lambda: path.stat().st_mtime_ns > second)


def test_a_health_file_in_a_missing_directory_is_refused(tmp_path):
    bad = tmp_path / "missing" / "alive"
    completed = subprocess.run(
        [sys.executable, "-m", "django", "later_worker", "--burst", "--health-file", str(bad)],
        cwd=ROOT,
        env=worker_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 2
    assert completed.stderr.rstrip().endswith(
        f"argument --health-file: {str(bad)!r} is not a file path in an existing directory"
    ), completed.stderr
