"""Job-state SQL differs by database inside ``later_django/sql/``, and nowhere new.

Every other place that asks which database it runs on is listed below with
the reason it may; a new one fails the scan until its statements move to
``sql/postgres.py`` and ``sql/sqlite.py`` (or it is listed, with a reason
that is not job-state SQL).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "later_django"
VENDOR_NAMES = {"is_postgres", "vendor"}

ALLOWED = {
    "db.py": "the helpers the dialects share: connections, datetimes, transactions",
    "routers.py": "refuses a database Later does not support",
    "backend.py": "the system checks, which name the database's settings",
    "storage/store.py": "refuses a database Later does not support",
    "storage/maintenance.py": "SQLite's own upkeep (WAL checkpoints and VACUUM), not job state",
    "worker/runner.py": "how an idle worker is woken: LISTEN on PostgreSQL, a file watch on SQLite",
}


def vendor_branches(path: Path) -> list[int]:
    """Lines of ``path`` that ask which database they run on."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.Name) and node.id in VENDOR_NAMES)
        or (isinstance(node, ast.Attribute) and node.attr in VENDOR_NAMES)
        or (isinstance(node, ast.alias) and node.name in VENDOR_NAMES)
    )


def test_only_the_sql_modules_ask_which_database_they_run_on():
    asking = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(("sql/", "migrations/")) or not vendor_branches(path):
            continue
        asking.add(relative)
    unexplained = sorted(asking - set(ALLOWED))
    assert unexplained == [], "move the database's statements to later_django/sql/: " + ", ".join(
        unexplained
    )
    assert sorted(set(ALLOWED) - asking) == [], "stale entries in ALLOWED"


def test_the_engine_package_never_asks():
    assert not [p for p in ALLOWED if p.startswith("engine/")]


def test_the_scan_finds_a_vendor_branch(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from ..db import is_postgres\n"
        "if connection.vendor == 'sqlite':\n"
        "    pass\n"
        "# is_postgres in a comment is prose\n"
    )
    assert vendor_branches(sample) == [1, 2]
