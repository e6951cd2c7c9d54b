"""The built wheel: the package and its files only, with the declared metadata.

The wheel is built offline from a copy of the checkout (``--no-build-isolation``
uses the setuptools installed beside the tests; the dev extra pins it).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from email.message import Message
from email.parser import Parser

import pytest

import later_django
from tests.conftest import ROOT

pytestmark = pytest.mark.packaging

DIST_INFO = f"later_django-{later_django.__version__}.dist-info"
# Whatever the checkout holds beside its sources: nothing a build should see.
NOT_SOURCES = shutil.ignore_patterns(
    ".*", "__pycache__", "build", "dist", "*.egg-info", "*.sqlite3*", "node_modules"
)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[zipfile.ZipFile]:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(ROOT, source, ignore=NOT_SOURCES)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "--disable-pip-version-check",
            "--quiet",
            "--wheel-dir",
            str(work / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    [path] = (work / "dist").glob("*.whl")
    with zipfile.ZipFile(path) as opened:
        yield opened


@pytest.fixture(scope="module")
def metadata(wheel: zipfile.ZipFile) -> Message:
    return Parser().parsestr(wheel.read(f"{DIST_INFO}/METADATA").decode())


def test_the_wheel_holds_only_the_package_and_its_metadata(wheel):
    names = wheel.namelist()
    assert {name.split("/")[0] for name in names} == {"later_django", DIST_INFO}
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_the_wheel_holds_the_templates_static_files_migrations_and_license(wheel):
    names = set(wheel.namelist())
    for name in [
        "later_django/py.typed",
        "later_django/templates/later/dashboard/base.html",
        "later_django/templates/admin/later/pagination.html",
        "later_django/templatetags/later_csp.py",
        "later_django/static/later/dashboard.js",
        "later_django/static/later/dashboard.css",
        "later_django/migrations/0001_initial.py",
        "later_django/management/commands/later_worker.py",
        f"{DIST_INFO}/licenses/LICENSE",
    ]:
        assert name in names
    assert (
        "Copyright (c) 2026 the later_django authors"
        in wheel.read(f"{DIST_INFO}/licenses/LICENSE").decode()
    )


def test_the_metadata_declares_the_license_and_classifiers(metadata):
    assert metadata["License-Expression"] == "MIT"
    classifiers = metadata.get_all("Classifier")
    for classifier in [
        "Framework :: Django :: 5.2",
        "Framework :: Django :: 6.0",
        "Framework :: Django :: 6.1",
        "Programming Language :: Python :: 3 :: Only",
        "Topic :: System :: Distributed Computing",
    ]:
        assert classifier in classifiers
    assert metadata.get_all("Project-URL") is None


def test_psycopg_and_django_environ_are_extras_only(metadata):
    requirements = metadata.get_all("Requires-Dist")
    required = [r for r in requirements if "extra ==" not in r]
    assert not [r for r in required if r.startswith(("psycopg", "django-environ"))], required
    assert {"postgres", "postgres-binary", "example", "dev"} <= set(
        metadata.get_all("Provides-Extra")
    )
    assert 'psycopg>=3.2; extra == "postgres"' in requirements
    assert 'psycopg[binary]>=3.2; extra == "postgres-binary"' in requirements
    assert 'django-environ>=0.11; extra == "example"' in requirements
    assert 'django-environ>=0.11; extra == "dev"' in requirements


def test_django_5_2_gets_the_tasks_backport_through_an_extra(metadata):
    requirements = metadata.get_all("Requires-Dist")
    assert "django<6.2,>=5.2" in requirements
    assert 'django-tasks>=0.12; extra == "django52"' in requirements
    assert not [r for r in requirements if r.startswith("django-tasks") and "extra ==" not in r]
