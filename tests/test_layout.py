"""The engine's job-state SQL differs by database only inside ``engine/sql/``."""

from __future__ import annotations

import ast
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / "later_django" / "engine"
VENDOR_NAMES = {"is_postgres", "vendor"}


def vendor_branches(path: Path) -> list[int]:
    """Lines of ``path`` that ask which database they run on."""
    return sorted(
        node.lineno
        for node in ast.walk(ast.parse(path.read_text()))
        if (isinstance(node, ast.Name) and node.id in VENDOR_NAMES)
        or (isinstance(node, ast.Attribute) and node.attr in VENDOR_NAMES)
        or (isinstance(node, ast.alias) and node.name in VENDOR_NAMES)
    )


def test_the_engine_asks_for_the_database_only_in_its_sql_modules():
    found = [
        f"{path.relative_to(ENGINE.parent.parent)}:{line}"
        for path in sorted(ENGINE.rglob("*.py"))
        if "sql" not in path.relative_to(ENGINE).parts[:-1]
        for line in vendor_branches(path)
    ]
    assert found == [], "move the database's statements to engine/sql/:\n" + "\n".join(found)


def test_the_scan_finds_a_vendor_branch(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from ..db import is_postgres\n"
        "if connection.vendor == 'sqlite':\n"
        "    pass\n"
        "# is_postgres in a comment is prose\n"
    )
    assert vendor_branches(sample) == [1, 2]


def test_both_databases_sql_modules_exist_and_are_used():
    from later_django.engine import sql
    from later_django.engine.sql import postgres, sqlite

    assert sql.POSTGRES is postgres and sql.SQLITE is sqlite
    assert postgres.ALONE and not sqlite.ALONE
