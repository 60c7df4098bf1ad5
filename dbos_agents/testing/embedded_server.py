"""The embedded Postgres as a test run uses it: one server for all of the run's processes.

With nothing configured, ``pytest -n auto`` runs its processes against one embedded server
(the last source of :func:`~dbos_agents.testing.provision_test_database`), so the server needs
connections for all of them, and no run may restart or stop it while another is on it. Every
process that uses it holds a shared ``flock`` on ``.<data dir name>.users`` beside the data
directory for as long as it does; raising its connections or stopping it takes that lock
exclusively without waiting, and is skipped when it cannot.

- Connections: a run that asks for more ``max_connections`` than the server has raises them
  with ``ALTER SYSTEM`` (kept in the data directory, so later runs start with them) and a
  restart, when no other run and no other client is on the server; otherwise it works with
  what there is.
- Commits: ``synchronous_commit`` is off, as in the test container: a test server has
  nothing to keep if the machine dies, and a commit then waits for no disk flush.
- The end: the run that started the server stops it, unless another run is still on it; a
  server that was running before the run (a run killed before its end) keeps running.

On Windows nothing is held or stopped: the server outlives the run, as the CLI's does.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import psycopg
from psycopg import sql
from psycopg.rows import TupleRow

from ..store.embedded import embedded_database_url, embedded_status, stop_embedded_database

_CONNECT_TIMEOUT_SEC = 10
_LINGER_SEC = 1.0


@dataclass
class EmbeddedTestServer:
    """The embedded server one test process uses; ``url`` names its ``postgres`` database."""

    url: str
    data_dir: Path
    started: bool
    """Whether it was not running when this process asked for it."""
    _users: IO[str] | None = field(default=None, repr=False)

    def close(self) -> None:
        """Let go of the server: stop it when this process started it and no other uses it."""
        users, self._users = self._users, None
        if users is None:
            return
        try:
            if self.started and _take_alone(users):
                stop_embedded_database(self.data_dir)
        finally:
            users.close()  # releases the lock


def open_embedded_server(
    data_dir: str | os.PathLike[str], max_connections: int = 0
) -> EmbeddedTestServer:
    """Start or adopt the embedded server in ``data_dir`` for a test process and hold it.

    ``max_connections``: at least this many when the server can be restarted (see the
    module's docstring); read the server's ``max_connections`` for what it got. Call
    :meth:`EmbeddedTestServer.close` when done.
    """
    pgdata = Path(data_dir).expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    users = _hold(pgdata)
    try:
        started = embedded_status(pgdata).state != "running"
        url = embedded_database_url(pgdata, database="postgres")
        if _tune(url) < max_connections and users is not None and _alone(users, url):
            try:
                url = _restart_with(pgdata, url, max_connections)
            finally:
                _share(users)
    except BaseException:
        if users is not None:
            users.close()
        raise
    return EmbeddedTestServer(url, pgdata, started, users)


def _hold(pgdata: Path) -> IO[str] | None:
    """Open the users file and take a shared lock on it (waits while a run stops the server)."""
    if sys.platform == "win32":
        return None
    users = (pgdata.parent / f".{pgdata.name}.users").open("a")
    _share(users)
    return users


def _share(users: IO[str]) -> None:
    if sys.platform != "win32":
        import fcntl

        fcntl.flock(users, fcntl.LOCK_SH)


def _take_alone(users: IO[str]) -> bool:
    """Turn the shared lock exclusive without waiting: no other process holds the server.

    On failure the lock may be lost (flock converts by unlocking first); callers that go on
    using the server take it again with :func:`_share`.
    """
    if sys.platform == "win32":
        return False
    import fcntl

    try:
        fcntl.flock(users, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _alone(users: IO[str], url: str) -> bool:
    """Exclusive lock taken and nobody else connected (a run of an older version, ``psql``).

    A session this process just closed can linger for a moment while its backend exits, so
    others must still be there after a short wait to count.
    """
    if not _take_alone(users):
        _share(users)
        return False
    deadline = time.monotonic() + _LINGER_SEC
    with psycopg.connect(url, connect_timeout=_CONNECT_TIMEOUT_SEC, autocommit=True) as conn:
        while _other_sessions(conn) > 0:
            if time.monotonic() > deadline:
                _share(users)
                return False
            time.sleep(0.1)
    return True


def _other_sessions(conn: psycopg.Connection[TupleRow]) -> int:
    row = conn.execute(
        "SELECT count(*)::int FROM pg_stat_activity"
        " WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
    ).fetchone()
    return int(row[0]) if row is not None else 0


def _tune(url: str) -> int:
    """Turn ``synchronous_commit`` off (a reload is enough); return ``max_connections``."""
    with psycopg.connect(url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_SEC) as conn:
        row = conn.execute(
            "SELECT current_setting('synchronous_commit'), current_setting('max_connections')::int"
        ).fetchone()
        assert row is not None
        if row[0] != "off":
            conn.execute("ALTER SYSTEM SET synchronous_commit = off")
            conn.execute("SELECT pg_reload_conf()")
        return int(row[1])


def _restart_with(pgdata: Path, url: str, max_connections: int) -> str:
    """``max_connections`` takes a restart; the server comes back on its remembered port."""
    with psycopg.connect(url, autocommit=True, connect_timeout=_CONNECT_TIMEOUT_SEC) as conn:
        conn.execute(
            sql.SQL("ALTER SYSTEM SET max_connections = {}").format(sql.Literal(max_connections))
        )
    stop_embedded_database(pgdata)
    return embedded_database_url(pgdata, database="postgres")
