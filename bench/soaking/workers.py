"""The soak's ``later_worker`` processes, its child processes and the server restart."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, bench_env, run_child

from .db import SoakDatabase

SCRIPT = str(ROOT / "bench" / "soak.py")


def child(mode: str, url: str, *args: str) -> str:
    """Run ``bench/soak.py --child mode`` (Django set up on ``url``); return its output."""
    return run_child(SCRIPT, mode, url, *args)


def heartbeat_for(lease: float) -> float:
    return min(5.0, lease / 4)


class Workers:
    """``later_worker`` processes on one database, each logging to a file of its own."""

    def __init__(self, url: str, concurrency: int, lease: float) -> None:
        self.url, self.concurrency, self.lease = url, str(concurrency), lease
        self.logs = Path(tempfile.mkdtemp(prefix="later-soak-"))
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = 0

    def start(self) -> subprocess.Popen[bytes]:
        env = bench_env(
            self.url,
            LATER_POLL_INTERVAL="0.2",
            LATER_BENCH_LEASE_SECONDS=str(self.lease),
            LATER_HEARTBEAT_INTERVAL=str(heartbeat_for(self.lease)),
        )
        self.started += 1
        with open(self.logs / f"worker-{self.started}.log", "wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "django", "later_worker", "--concurrency", self.concurrency],
                env=env,
                cwd=ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        self.procs.append(proc)
        return proc

    def kill_one(self) -> None:
        """SIGKILL a worker chosen at random and start another in its place."""
        victim = random.choice(self.procs)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        self.procs.remove(victim)
        self.start()

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


def restart_postgres() -> float:
    """Restart the local PostgreSQL cluster; return the seconds the command took."""
    version = sorted(os.listdir("/etc/postgresql"))[-1]
    cluster = os.environ.get("LATER_PG_CLUSTER", "main")
    began = time.monotonic()
    subprocess.run(
        ["pg_ctlcluster", "--skip-systemctl-redirect", version, cluster, "restart"],
        check=True,
        capture_output=True,
    )
    return time.monotonic() - began


def stall_seconds(lease: float) -> float:
    return 2 * lease + 60


def wait_until_finished(db: SoakDatabase, lease: float) -> tuple[float, bool]:
    """Wait until no job is left unfinished; return the seconds and whether it stalled."""
    began = time.monotonic()
    progress_at, best = began, None
    while (unfinished := db.unfinished()) > 0:
        now = time.monotonic()
        if best is None or unfinished < best:
            progress_at, best = now, unfinished
        elif now - progress_at > stall_seconds(lease):
            return now - began, True
        time.sleep(0.25)
    return time.monotonic() - began, False
