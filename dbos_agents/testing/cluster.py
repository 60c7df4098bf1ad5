"""A private Postgres cluster that a test may stop, restart and take away at will.

Outage, failover and soak tests must never touch a shared server, so they start their own:
``initdb`` into a temporary directory and ``pg_ctl`` on a free loopback port, from the
server binaries of the machine (``pg_config --bindir``, else ``/usr/lib/postgresql/*/bin``).
As root the binaries run as the ``postgres`` OS user, since ``initdb`` refuses root.

    with PrivateCluster() as pg:
        url = pg.url                       # postgresql://postgres@127.0.0.1:<port>/postgres
        pg.stop()                          # an outage: clients see connection errors
        pg.start()                         # the same data, the same port
        pg.restart(mode="immediate")       # a crash-restart, as a failover looks to clients
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Literal

import psycopg

StopMode = Literal["smart", "fast", "immediate"]


def _bindir() -> Path:
    found = shutil.which("pg_config")
    if found:
        out = subprocess.run([found, "--bindir"], capture_output=True, text=True, check=False)
        candidate = Path(out.stdout.strip())
        if (candidate / "initdb").exists():
            return candidate
    for pattern in ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin"):
        for path in sorted(glob.glob(pattern), reverse=True):
            if (Path(path) / "initdb").exists():
                return Path(path)
    raise RuntimeError("no Postgres server binaries (initdb, pg_ctl) found on this machine")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class PrivateCluster:
    """One throwaway Postgres cluster owned by the calling test (see the module doc)."""

    def __init__(self, base_dir: str | os.PathLike[str] | None = None, port: int | None = None):
        self.base = Path(base_dir or tempfile.mkdtemp(prefix="dbos_agents_pg_"))
        self.data = self.base / "data"
        self.logfile = self.base / "postgres.log"
        self.port = port or free_port()
        self.bindir = _bindir()
        self._as_postgres = os.geteuid() == 0
        self._initialized = False

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [str(self.bindir / args[0]), *args[1:]]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check)

    def init(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        if self._as_postgres:
            shutil.chown(self.base, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "--no-sync")
        conf = self.data / "postgresql.conf"
        with conf.open("a") as f:
            f.write(
                f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.base}'\nmax_connections = 200\n"
                # fsync off only risks data on an OS crash; a killed postmaster (restart
                # mode "immediate") loses nothing, as in production. synchronous_commit
                # stays on: with it off, an immediate restart would drop acknowledged commits.
                "fsync = off\nfull_page_writes = off\n"
            )
        self._initialized = True

    def start(self, timeout: float = 30.0) -> None:
        if not self._initialized:
            self.init()
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-w", "start")
        self.wait_ready(timeout)

    def stop(self, mode: StopMode = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop", check=False)

    def restart(self, mode: StopMode = "immediate") -> None:
        self.stop(mode)
        self.start()

    def is_running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with psycopg.connect(self.url, connect_timeout=2) as conn:
                    conn.execute("SELECT 1")
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def close(self) -> None:
        """Stop the server and delete its files. Safe to call more than once."""
        if self._initialized:
            self.stop("immediate")
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> PrivateCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
