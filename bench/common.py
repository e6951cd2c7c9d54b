"""Helpers the benchmark scripts share: throwaway databases and child processes."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PG_ADMIN = os.environ.get("LATER_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


def bench_env(url: str, **extra: str) -> dict[str, str]:
    """Environment for a process that opens the benchmark database ``url``."""
    return dict(
        os.environ,
        DATABASE_URL=url,
        DJANGO_SETTINGS_MODULE="bench.settings",
        PYTHONPATH=str(ROOT),
        **extra,
    )


def run_child(script: str, mode: str, url: str, *args: str) -> str:
    """Run ``script --child mode args`` against ``url``; return what it printed."""
    out = subprocess.run(
        [sys.executable, script, "--child", mode, *args],
        env=bench_env(url),
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{out.stdout}\n{out.stderr}")
    return out.stdout.strip()


def count(url: str, sql: str) -> int:
    """The one number ``sql`` (a ``SELECT COUNT(*)``) reads from the database at ``url``,
    by the driver alone: a poll without a Django child process, which costs a CPU."""
    if url.startswith("sqlite:///"):
        import sqlite3
        from contextlib import closing

        with closing(sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30)) as conn:
            return conn.execute(sql).fetchone()[0]
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(sql).fetchone()[0]


def database_urls(which: str, admin: str = PG_ADMIN) -> list[tuple[str, str, object]]:
    """Create a throwaway database of each kind ``which`` names: (kind, url, handle)."""
    urls = []
    if which in ("sqlite", "both"):
        path = Path(tempfile.mkdtemp()) / "bench.sqlite3"
        urls.append(("sqlite", f"sqlite:///{path}", path))
    if which in ("postgres", "both"):
        import psycopg

        name = f"later_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        urls.append(("postgres", admin.rsplit("/", 1)[0] + f"/{name}", name))
    return urls


def drop(kind: str, handle: object, admin: str = PG_ADMIN) -> None:
    if kind == "postgres":
        import psycopg

        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{handle}" WITH (FORCE)')


def bench_main(
    doc: str,
    child_main: Callable[[str, list[str]], None],
    add_options: Callable[[argparse.ArgumentParser], None],
    each: Callable[[str, str, argparse.Namespace], None],
) -> None:
    """A script's entry point: run a ``--child`` mode, or parse ``--db`` and the
    script's options and call ``each(kind, url, options)`` on a throwaway database
    of each kind, dropped afterwards."""
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child_main(sys.argv[2], sys.argv[3:])
        return
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--db", choices=["sqlite", "postgres", "both"], default="both")
    add_options(parser)
    options = parser.parse_args()
    for kind, url, handle in database_urls(options.db):
        try:
            each(kind, url, options)
        finally:
            drop(kind, handle)
