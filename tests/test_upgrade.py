"""Upgrading from a release strands no job: work left by release 0.1.0 ends right under this code.

Release 0.1.0 is built from git (tag ``v0.1.0``, or its commit where a clone
has no tags), installed into a fresh virtual environment that borrows the
suite's installed dependencies (so nothing is downloaded), and given a fresh
database of the suite's kind. Under it the project in ``tests/upgrade``
migrates and leaves one piece of work of every kind pending. Then this
checkout's code migrates the same database and runs a worker, and every job
must reach the end it would have reached without the upgrade.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import sysconfig
import tarfile
import venv
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from django.db import connection

from bench.common import database_urls, drop
from tests.conftest import ROOT, wait_for
from tests.worker.conftest import admin_url

pytestmark = [pytest.mark.process, pytest.mark.upgrade]

RELEASE = "0.1.0"
RELEASE_TAG = "v0.1.0"
RELEASE_COMMIT = "6569a2f767ab5864de30a50069abd2a7f8c5f3c7"
PROJECT = "later_upgrade"
TIMEOUT = 60


def git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=False, timeout=60
    )


def release_commit() -> str:
    """The commit of release 0.1.0 in this clone: its tag, else its recorded commit."""
    tagged = git("rev-parse", "--verify", "--quiet", f"{RELEASE_TAG}^{{commit}}")
    if tagged.returncode == 0:
        commit = tagged.stdout.strip()
        assert commit == RELEASE_COMMIT, (
            f"Tag {RELEASE_TAG} points at {commit}, but release {RELEASE} is {RELEASE_COMMIT}."
        )
        return commit
    if git("cat-file", "-e", f"{RELEASE_COMMIT}^{{commit}}").returncode == 0:
        return RELEASE_COMMIT
    pytest.fail(
        f"Release {RELEASE} is not in this clone at {ROOT}: neither tag {RELEASE_TAG} nor commit "
        f"{RELEASE_COMMIT} is present. Fetch it (git fetch --tags, or a clone with full "
        "history) to run the upgrade test."
    )


@pytest.fixture(scope="module")
def release_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The python of a fresh virtual environment with release 0.1.0 installed."""
    work = tmp_path_factory.mktemp("release")
    archive = work / "release.tar"
    made = git("archive", "--format=tar", "-o", str(archive), release_commit())
    assert made.returncode == 0, made.stderr
    with tarfile.open(archive) as tar:
        tar.extractall(work / "source", filter="data")
    environment = work / "venv"
    venv.create(environment, with_pip=False)
    python = environment / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    # Django, msgpack, psycopg and the rest come from the suite's own environment,
    # after the release on the path; its .pth files (the checkout's editable
    # install among them) are not read from a directory added this way.
    (site / "suite-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    installed = subprocess.run(
        [
            sys.executable,
            *("-m", "pip", "install", "--quiet", "--disable-pip-version-check"),
            *("--no-deps", "--no-index", "--no-build-isolation", "--target", str(site)),
            str(work / "source"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert installed.returncode == 0, installed.stdout + installed.stderr
    return python


@pytest.fixture
def database_url(tmp_path: Path) -> Iterator[str]:
    """A fresh, empty database of the suite's kind, dropped afterwards."""
    if connection.vendor == "sqlite":
        yield f"sqlite:///{tmp_path / 'upgrade.sqlite3'}"
        return
    admin = admin_url()
    [(kind, url, handle)] = database_urls("postgres", admin)
    try:
        yield url
    finally:
        drop(kind, handle, admin)


class Project:
    """The upgrade project on one database, run by either release's code."""

    def __init__(self, tmp_path: Path, database_url: str) -> None:
        self.path = tmp_path / "project"
        shutil.copytree(ROOT / "tests" / "upgrade", self.path / PROJECT)
        self.database_url = database_url
        self.logs = tmp_path

    def env(self, code: str | None) -> dict[str, str]:
        """Environment for a process of the project; ``code`` is a checkout to import first."""
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DJANGO_", "LATER_", "PYTHON"))
        }
        paths = [str(self.path)] if code is None else [code, str(self.path)]
        env.update(
            DJANGO_SETTINGS_MODULE=f"{PROJECT}.settings",
            LATER_UPGRADE_DATABASE_URL=self.database_url,
            PYTHONPATH=os.pathsep.join(paths),
        )
        return env

    def run(self, python: Path | str, *args: str, code: str | None = None) -> str:
        """Run ``python *args`` in the project; return its standard output."""
        done = subprocess.run(
            [str(python), *args],
            cwd=self.path,
            env=self.env(code),
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
        assert done.returncode == 0, f"{args} exited {done.returncode}:\n{done.stdout}{done.stderr}"
        return done.stdout

    def step(self, python: Path | str, *args: str, code: str | None = None) -> dict:
        out = self.run(python, "-m", f"{PROJECT}.scenario", *args, code=code)
        return json.loads(out.strip().splitlines()[-1])


def at(value: str | None) -> datetime:
    assert value is not None
    return datetime.fromisoformat(value)


def test_work_left_by_release_0_1_0_ends_right_after_the_upgrade(
    release_python, database_url, tmp_path
):
    old, new, checkout = release_python, sys.executable, str(ROOT)
    project = Project(tmp_path, database_url)

    # Release 0.1.0, from its own installation.
    about = project.step(old, "about")
    assert about["version"] == RELEASE
    assert Path(about["file"]).is_relative_to(old.parent.parent), about
    project.run(old, "-m", "django", "migrate", "--verbosity", "0")
    ids = project.step(old, "first-attempt")
    # One claimed job: the first attempt fails and the job waits for its retry.
    project.run(old, "-m", "django", "later_worker", "--max-jobs", "1", "--verbosity", "0")
    ids.update(project.step(old, "enqueue"))
    before = project.step(old, "report", json.dumps(ids))
    stages = {name: job["stage"] for name, job in before["jobs"].items()}
    assert stages == {
        "retrying": "requeued",
        "plain": "enqueued",
        "delayed": "delayed",
        "parent": "enqueued",
        "child": "waiting",
        "first": "enqueued",
        "second": "enqueued",
    }
    assert before["jobs"]["retrying"]["errors"] == ["builtins.RuntimeError"]
    assert before["schedule"]["last_job"] is None
    assert before["log"] == [["order-7", b"\x00shipped\xff".hex()]]

    # This checkout's code on the same database.
    assert project.step(new, "about", code=checkout)["file"].startswith(checkout)
    project.run(new, "-m", "django", "migrate", "--verbosity", "0", code=checkout)
    log = project.logs / "worker.log"
    with log.open("wb") as output:
        worker = subprocess.Popen(
            [new, "-m", "django", "later_worker", "--concurrency", "4"],
            cwd=project.path,
            env=project.env(checkout),
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        after: dict = {}

        def everything_ended() -> bool:
            after.update(project.step(new, "report", json.dumps(ids), code=checkout))
            fired = after["schedule"]["last_job"]
            return all(job["status"] == "SUCCESSFUL" for job in after["jobs"].values()) and (
                fired is not None and fired["status"] == "SUCCESSFUL"
            )

        everything_ended.__doc__ = "every job of release 0.1.0 and a scheduled one succeeded"
        try:
            wait_for(everything_ended, timeout=TIMEOUT, step=0.5)
        except AssertionError as e:
            raise AssertionError(
                f"{e}; last report: {json.dumps(after, indent=1)}\n"
                f"worker log (end):\n{log.read_text(errors='replace')[-4000:]}"
            ) from e
    finally:
        worker.send_signal(signal.SIGTERM)
        code = worker.wait(timeout=TIMEOUT)
    assert code == 0, log.read_text()

    jobs = after["jobs"]
    assert {name: job["return_value"] for name, job in jobs.items()} == {
        "retrying": "retrying on attempt 2",
        "plain": "plain",
        "delayed": "delayed",
        "parent": "parent",
        "child": "child",
        "first": "first",
        "second": "second",
    }
    assert {name: job["stage"] for name, job in jobs.items()} == dict.fromkeys(jobs, "success")
    assert jobs["retrying"]["errors"] == ["builtins.RuntimeError"]
    # A continuation starts only after its parent ended; a partition runs in order.
    assert at(jobs["child"]["started_at"]) >= at(jobs["parent"]["finished_at"])
    assert at(jobs["second"]["started_at"]) >= at(jobs["first"]["finished_at"])
    fired = after["schedule"]["last_job"]
    assert fired["return_value"] == "scheduled"
    assert at(after["schedule"]["next_run_at"]) > at(before["schedule"]["next_run_at"])
    assert after["log"] == before["log"]


def test_a_clone_without_the_tag_finds_the_release_by_its_commit(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "RELEASE_TAG", "v0.0.0-not-a-tag")
    assert release_commit() == RELEASE_COMMIT


def test_a_clone_without_the_release_says_so(monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "RELEASE_TAG", "v0.0.0-not-a-tag")
    monkeypatch.setattr(sys.modules[__name__], "RELEASE_COMMIT", "0" * 40)
    with pytest.raises(pytest.fail.Exception) as failed:
        release_commit()
    assert str(failed.value) == (
        f"Release 0.1.0 is not in this clone at {ROOT}: neither tag v0.0.0-not-a-tag nor commit "
        f"{'0' * 40} is present. Fetch it (git fetch --tags, or a clone with full history) to "
        "run the upgrade test."
    )
