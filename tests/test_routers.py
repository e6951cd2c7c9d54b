"""Later's tables live only on the databases its backends use, with or without the router."""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from types import SimpleNamespace
from urllib.parse import urlparse

import pytest
from django.contrib.auth.models import User
from django.db.migrations.loader import MigrationLoader
from django.test import override_settings

from later_django.models import JobIndexRow
from later_django.routers import LaterRouter, later_databases
from tests import tasks
from tests.conftest import ROOT, manage

BACKEND = "later_django.backend.LaterBackend"
TWO_BACKENDS = {
    "default": {"BACKEND": BACKEND},
    "reports": {"BACKEND": BACKEND, "OPTIONS": {"namespace": "reports", "database": "jobs"}},
    "again": {"BACKEND": BACKEND, "OPTIONS": {"database": "jobs"}},
    "immediate": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"},
}
SETTINGS = "tests.multidb_settings"


def later_migrations() -> set[str]:
    return {name for app, name in MigrationLoader(None).disk_migrations if app == "later"}


def sqlite_objects(path: Path, kind: str) -> set[str]:
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT name FROM sqlite_master WHERE type = ?", [kind]).fetchall()
    return {name for (name,) in rows}


def recorded_later_migrations(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT name FROM django_migrations WHERE app = 'later'").fetchall()
    return {name for (name,) in rows}


def later_tables(names: set[str]) -> set[str]:
    return {name for name in names if name.startswith("later_")}


@override_settings(TASKS=TWO_BACKENDS)
def test_the_databases_are_those_of_the_later_backends_in_tasks_order():
    assert later_databases() == ["default", "jobs"]


@override_settings(TASKS={"immediate": TWO_BACKENDS["immediate"]})
def test_without_a_later_backend_the_tables_belong_on_default():
    assert later_databases() == ["default"]


@override_settings(TASKS=TWO_BACKENDS)
def test_the_router_lets_later_migrate_only_where_a_backend_keeps_jobs():
    router = LaterRouter()
    assert router.allow_migrate("default", "later") is True
    assert router.allow_migrate("jobs", "later", model_name="jobindexrow") is True
    assert router.allow_migrate("other", "later") is False
    assert router.allow_migrate("other", "auth") is None
    assert router.allow_migrate("default", "auth") is None


@override_settings(TASKS=TWO_BACKENDS)
def test_the_router_sends_later_queries_that_name_no_database_to_later():
    router = LaterRouter()
    assert router.db_for_read(JobIndexRow) == "default"
    assert router.db_for_write(JobIndexRow) == "default"
    row_of_jobs = SimpleNamespace(_state=SimpleNamespace(db="jobs"))
    assert router.db_for_write(JobIndexRow, instance=row_of_jobs) == "jobs"
    row_elsewhere = SimpleNamespace(_state=SimpleNamespace(db="other"))
    assert router.db_for_read(JobIndexRow, instance=row_elsewhere) == "default"
    assert router.db_for_read(User) is None


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_migrate_on_a_second_database_creates_no_later_tables_and_jobs_still_run(
    tmp_path, run_burst
):
    other = tmp_path / "other.sqlite3"
    env = {
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "LATER_TEST_OTHER_DATABASE_URL": f"sqlite:///{other}",
        "LATER_TEST_ROUTER": "1",
    }
    done = manage("migrate", "--database", "other", **env)
    assert done.returncode == 0, done.stderr

    assert later_tables(sqlite_objects(other, "table")) == set()
    assert sqlite_objects(other, "trigger") == set()
    assert "auth_user" in sqlite_objects(other, "table")
    # Recorded as applied, so a later migrate has nothing left to do there.
    assert recorded_later_migrations(other) == later_migrations()

    # Later keeps working on its own database, with the router in place.
    result = tasks.add.enqueue(2, 3)
    run_burst(**env)
    assert tasks.add.get_result(result.id).return_value == 5


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_without_the_router_django_puts_later_tables_on_every_database_it_migrates(tmp_path):
    other = tmp_path / "other.sqlite3"
    env = {
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "LATER_TEST_OTHER_DATABASE_URL": f"sqlite:///{other}",
    }
    done = manage("migrate", "--database", "other", **env)
    assert done.returncode == 0, done.stderr
    # Django's default: every app everywhere. The tables are whole (triggers
    # included), though no backend uses them; the router above is what keeps them off.
    assert "later_jobs_index" in sqlite_objects(other, "table")
    assert "later_jobs_index_count_insert" in sqlite_objects(other, "trigger")


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_later_on_an_alias_of_its_own_migrates_and_runs_there(tmp_path):
    default, jobs = tmp_path / "default.sqlite3", tmp_path / "jobs.sqlite3"
    env = {
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "LATER_TEST_OTHER_DATABASE_URL": f"sqlite:///{jobs}",
        "LATER_TEST_LATER_DATABASE": "other",
        "LATER_TEST_ROUTER": "1",
    }

    def run(*args: str, timeout: float = 60) -> str:
        """Run manage.py with these settings; return the last line it printed."""
        done = manage(*args, database_url=f"sqlite:///{default}", timeout=timeout, **env)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""

    run("migrate")
    run("migrate", "--database", "other")
    assert later_tables(sqlite_objects(default, "table")) == set()
    assert "auth_user" in sqlite_objects(default, "table")
    assert "later_jobs_index" in sqlite_objects(jobs, "table")
    assert "later_jobs_index_count_insert" in sqlite_objects(jobs, "trigger")

    job_id = run("shell", "-c", "from tests import tasks; print(tasks.add.enqueue(20, 22).id)")
    run("later_worker", "--burst")
    # Neither read names a database: the backend reads its own, the router sends
    # the ORM query of a Later model (as the admin's changelists make) to it.
    found = run(
        "shell",
        "-c",
        "from tests import tasks; from later_django.models import JobIndexRow; "
        f"print(tasks.add.get_result({job_id!r}).return_value, "
        f"JobIndexRow.objects.get(job_id={job_id!r}).stage)",
    )
    assert found.split() == ["42", "success"]


# MariaDB: a database of a kind Later does not support, beside Later's own.

MYSQL_URL = os.environ.get("LATER_TEST_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")


@pytest.fixture
def mariadb_url() -> Iterator[str]:
    """A throwaway MariaDB/MySQL database (dropped afterwards), or a skip saying why not."""
    pymysql = pytest.importorskip("pymysql", reason="PyMySQL is not installed")
    server = urlparse(MYSQL_URL)
    params = {
        "host": server.hostname or "127.0.0.1",
        "port": server.port or 3306,
        "user": server.username or "root",
        "password": server.password or "",
    }
    try:
        admin = pymysql.connect(**params, connect_timeout=3, autocommit=True)
    except pymysql.err.OperationalError as e:
        pytest.skip(f"no MySQL/MariaDB server at {MYSQL_URL}: {e}")
    name = f"later_other_{os.urandom(4).hex()}"
    with admin.cursor() as cursor:
        cursor.execute(f"CREATE DATABASE {name}")
    try:
        yield server._replace(path=f"/{name}").geturl()
    finally:
        with admin.cursor() as cursor:
            cursor.execute(f"DROP DATABASE {name}")
        admin.close()


def mariadb_env(url: str, **extra: str) -> dict[str, str]:
    import pymysql

    driver = str(Path(pymysql.__file__).parent.parent)
    return {
        "DJANGO_SETTINGS_MODULE": SETTINGS,
        "LATER_TEST_OTHER_DATABASE_URL": url,
        "PYTHONPATH": os.pathsep.join([str(ROOT), driver]),
        **extra,
    }


def mariadb_objects(url: str) -> tuple[set[str], set[str]]:
    """Tables and triggers of the database at ``url``."""
    import pymysql

    server = urlparse(url)
    connection = pymysql.connect(
        host=server.hostname,
        port=server.port or 3306,
        user=server.username,
        password=server.password or "",
        database=server.path.lstrip("/"),
    )
    with connection, connection.cursor() as cursor:
        cursor.execute("SHOW TABLES")
        tables = {name for (name,) in cursor.fetchall()}
        cursor.execute("SHOW TRIGGERS")
        triggers = {row[0] for row in cursor.fetchall()}
    return tables, triggers


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_migrate_on_a_mariadb_database_later_does_not_use_succeeds_with_the_router(mariadb_url):
    done = manage(
        "migrate", "--database", "other", **mariadb_env(mariadb_url, LATER_TEST_ROUTER="1")
    )
    assert done.returncode == 0, done.stdout + done.stderr
    tables, triggers = mariadb_objects(mariadb_url)
    assert "auth_user" in tables
    assert later_tables(tables) == set()
    assert triggers == set()
    # Nothing about Later's models to warn of on a database that holds none of them.
    assert "later." not in done.stderr


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_migrate_on_a_mariadb_database_later_does_not_use_succeeds_without_the_router(
    mariadb_url,
):
    done = manage("migrate", "--database", "other", **mariadb_env(mariadb_url))
    assert done.returncode == 0, done.stdout + done.stderr
    tables, triggers = mariadb_objects(mariadb_url)
    # Django created the tables (no router said otherwise); the SQLite and
    # PostgreSQL steps were skipped instead of failing.
    assert "later_jobs_index" in tables
    assert triggers == set()


@pytest.mark.process
@pytest.mark.django_db(transaction=True)
def test_a_later_backend_on_mariadb_is_refused_by_migrate(mariadb_url):
    env = mariadb_env(mariadb_url, LATER_TEST_LATER_DATABASE="other")
    checked = manage("migrate", "--database", "other", **env)
    assert checked.returncode == 1
    assert (
        "(later.E004) Database 'other' is 'mysql'; later_django supports SQLite and PostgreSQL."
        in checked.stderr
    )
    unchecked = manage("migrate", "--database", "other", "--skip-checks", **env)
    assert unchecked.returncode == 1
    assert (
        "ImproperlyConfigured: Database 'other' is 'mysql', and a Later backend in TASKS keeps "
        "its jobs there (OPTIONS['database']); later_django supports SQLite and PostgreSQL. "
        "Point OPTIONS['database'] at a SQLite or PostgreSQL database." in unchecked.stderr
    )
