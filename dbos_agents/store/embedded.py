"""The embedded default database: a private Postgres from the ``pgserver`` wheel.

With no database URL configured, the CLI runs everything against a Postgres 16 whose binaries
ship inside the ``pgserver`` wheel, so a first run needs neither Docker nor a system install.

Where data lives: the cluster (``PGDATA``) is ``data_dir``, by default ``.dbos_agents/pgdata``
under the current working directory. The server log is ``<data_dir>/log`` and the TCP port it
listens on is remembered in ``<data_dir>/dbos_agents.port``. Deleting the directory deletes
every session; call :func:`stop_embedded_database` first, or the orphaned postmaster keeps
running until ``pgserver`` kills it when the same path is initialised again.

The server outlives the Python process that started it, so a worker subprocess started later,
the demo and the CLI all share one instance; any of them adopts it through ``postmaster.pid``.

Why TCP: ``pgserver`` listens only on a unix socket inside ``data_dir``; its URLs look like
``postgresql://postgres:@/postgres?host=/abs/data_dir``. Those break when the path is longer
than the ~107-byte socket path limit, cannot be reached from a container and are easy to
mangle. We therefore (re)start the cluster listening on ``127.0.0.1`` only, on a free port,
and return ``postgresql://postgres@127.0.0.1:<port>/<database>``. Authentication is ``trust``
(set by ``pgserver``'s initdb): any local user can connect as the superuser, which is fine for a
developer database and the reason it never listens beyond loopback.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import psycopg
from psycopg import errors, sql
from sqlalchemy.engine import URL, make_url

if TYPE_CHECKING:
    from pgserver.utils import PostmasterInfo

DEFAULT_DATA_DIR = Path(".dbos_agents") / "pgdata"
"""Relative to the current working directory."""

_HOST = "127.0.0.1"
_SUPERUSER = "postgres"  # the role pgserver's initdb creates
_PORT_FILE = "dbos_agents.port"
_START_TIMEOUT_SEC = 60
_CONNECT_TIMEOUT_SEC = 10


def embedded_database_url(
    data_dir: str | os.PathLike[str] | None = None,
    database: str = "dbos_agents",
) -> str:
    """Start or adopt the embedded Postgres in ``data_dir`` and return a URL to ``database``.

    ``data_dir`` is the Postgres data directory (default ``.dbos_agents/pgdata`` in the cwd);
    its parents are created. The database is created if missing; a concurrent creation by
    another process is tolerated. The returned ``postgresql://`` URL works with
    ``psycopg.connect`` and with SQLAlchemy (``postgresql+psycopg://`` after swapping the
    driver), from any process on this host. The server keeps running after this process exits.
    """
    pgdata = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR).expanduser().resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)

    if sys.platform == "win32":
        # pgserver already listens on 127.0.0.1 with a free port on Windows.
        _import_pgserver()
        from pgserver.postgres_server import get_server

        url = get_server(pgdata, cleanup_mode=None).get_uri(database)
    else:
        with _interprocess_lock(pgdata.parent / f".{pgdata.name}.lock"):
            port = _ensure_tcp_server(pgdata)
        url = URL.create(
            "postgresql", username=_SUPERUSER, host=_HOST, port=port, database=database
        ).render_as_string(hide_password=False)
    _ensure_database(url, database)
    return url


def stop_embedded_database(data_dir: str | os.PathLike[str] | None = None) -> bool:
    """Stop the embedded server for ``data_dir`` if it runs; return whether it was running.

    The server deliberately outlives its users, so tests and ``reset`` paths call this before
    deleting a data directory: an orphaned postmaster would keep the files and port busy.
    """
    pgdata = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR).expanduser().resolve()
    if not (pgdata / "PG_VERSION").exists():
        return False
    _import_pgserver()
    from pgserver.utils import PostmasterInfo

    lock_dir = pgdata.parent
    with _interprocess_lock(lock_dir / f".{pgdata.name}.lock"):
        info = PostmasterInfo.read_from_pgdata(pgdata)
        if info is None or not info.is_running():
            return False
        _pg_ctl(pgdata, _system_user(), ["-w", "-m", "fast", "stop"])
    return True


EmbeddedState = Literal["missing", "stopped", "running"]


@dataclass(frozen=True)
class EmbeddedStatus:
    """One data directory's cluster: not created yet, stopped, or running (where)."""

    pgdata: Path
    state: EmbeddedState
    port: int | None = None
    """The TCP port on 127.0.0.1; None unless running (or running socket-only)."""
    pid: int | None = None
    """The postmaster's process id while running: what outlives the commands that use it."""


def embedded_status(data_dir: str | os.PathLike[str] | None = None) -> EmbeddedStatus:
    """Whether the embedded server for ``data_dir`` exists and runs; creates nothing."""
    pgdata = Path(data_dir if data_dir is not None else DEFAULT_DATA_DIR).expanduser().resolve()
    if not (pgdata / "PG_VERSION").exists():
        return EmbeddedStatus(pgdata, "missing")
    _import_pgserver()
    from pgserver.utils import PostmasterInfo

    with _interprocess_lock(pgdata.parent / f".{pgdata.name}.lock"):  # not mid-start
        info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        return EmbeddedStatus(pgdata, "stopped")
    return EmbeddedStatus(pgdata, "running", _tcp_port(info), info.pid)


def _import_pgserver() -> None:
    """Import lazily: pgserver is only needed without a configured URL.

    Its import warns when ``XDG_RUNTIME_DIR`` is unset (containers, CI) before falling back to
    ``/tmp/runtime-<uid>`` for its lock file; that fallback is fine, so the warning is noise.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver  # noqa: F401


@contextlib.contextmanager
def _interprocess_lock(path: Path) -> Iterator[None]:
    """Serialise start/restart across processes (CLI, worker, demo starting at once).

    A no-op on Windows, where pgserver's own lock covers its start (and it starts on TCP).
    """
    if sys.platform == "win32":
        yield
        return
    import fcntl

    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _ensure_tcp_server(pgdata: Path) -> int:
    """Return the TCP port of a running server for ``pgdata``, starting one if needed.

    Caller holds the inter-process lock. A new directory goes through ``pgserver`` (initdb,
    and when running as root the unprivileged ``pgserver`` OS user and permissions); pgserver
    then starts it socket-only, so it is restarted once on TCP. An initialised but stopped
    cluster (e.g. after a reboot) is started on TCP directly, and pgserver merely adopts it.
    """
    _import_pgserver()
    from pgserver.postgres_server import get_server
    from pgserver.utils import PostmasterInfo

    info = PostmasterInfo.read_from_pgdata(pgdata)
    running = info is not None and info.is_running()
    if not running and (pgdata / "PG_VERSION").exists():
        _start_on_tcp(pgdata)
    # cleanup_mode=None: never stop the server at interpreter exit; others share it.
    get_server(pgdata, cleanup_mode=None)

    info = PostmasterInfo.read_from_pgdata(pgdata)
    if info is None or not info.is_running():
        raise RuntimeError(f"embedded Postgres in {pgdata} is not running; see {pgdata / 'log'}")
    port = _tcp_port(info)
    if port is None:
        _pg_ctl(pgdata, _system_user(), ["-w", "-m", "fast", "stop"])
        port = _start_on_tcp(pgdata)
    return port


def _tcp_port(info: PostmasterInfo) -> int | None:
    """The port when the postmaster listens on TCP, else None (pgserver's socket-only mode)."""
    if info.hostname and info.port is not None:
        return info.port
    return None


def _system_user() -> str | None:
    """pgserver refuses to run Postgres as root and runs it as the ``pgserver`` OS user."""
    if sys.platform == "win32":
        return None
    return "pgserver" if os.geteuid() == 0 else None


def _start_on_tcp(pgdata: Path) -> int:
    """Start the cluster on 127.0.0.1, preferring the remembered port so URLs stay valid."""
    port_file = pgdata / _PORT_FILE
    remembered = _read_port(port_file)
    candidates = [remembered] if remembered is not None and _port_is_free(remembered) else []
    candidates += [_free_port(), _free_port()]  # a fresh port can be taken before we bind it
    last_error: subprocess.CalledProcessError | None = None
    for port in candidates:
        try:
            # -k '': no unix socket at all, so no socket path length limit applies.
            _pg_ctl(
                pgdata,
                _system_user(),
                [
                    "-w",
                    "-t",
                    str(_START_TIMEOUT_SEC),
                    "-l",
                    str(pgdata / "log"),
                    "-o",
                    f"-h {_HOST} -p {port} -k ''",
                    "start",
                ],
            )
        except subprocess.CalledProcessError as exc:
            last_error = exc
            continue
        port_file.write_text(f"{port}\n")
        return port
    log = pgdata / "log"
    tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
    raise RuntimeError(f"could not start embedded Postgres in {pgdata}:\n{tail}") from last_error


def _pg_ctl(pgdata: Path, user: str | None, args: list[str]) -> None:
    """Run pgserver's bundled pg_ctl.

    Output goes to a temporary file, not a pipe: the postmaster inherits pg_ctl's descriptors
    and a pipe would never reach EOF. ``cwd`` is the data dir so the unprivileged user can
    always stat its working directory.
    """
    from pgserver._commands import POSTGRES_BIN_PATH

    command = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), *args]
    with tempfile.TemporaryFile("w+") as output:
        result = subprocess.run(
            command,
            stdout=output,
            stderr=output,
            cwd=pgdata,
            user=user,
            check=False,
            timeout=_START_TIMEOUT_SEC + 10,
        )
        if result.returncode != 0:
            output.seek(0)
            raise subprocess.CalledProcessError(result.returncode, command, output.read())


def _read_port(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _port_is_free(port: int) -> bool:
    """Bind like the postmaster does: SO_REUSEADDR, so TIME_WAIT left by a stop is no conflict."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((_HOST, port))
        except OSError:
            return False
    return True


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((_HOST, 0))
        port: int = sock.getsockname()[1]
    return port


def _ensure_database(url: str, database: str) -> None:
    """CREATE DATABASE unless it exists; losing a creation race to another process is fine."""
    admin_url = make_url(url).set(database="postgres")
    with psycopg.connect(
        admin_url.render_as_string(hide_password=False),
        autocommit=True,
        connect_timeout=_CONNECT_TIMEOUT_SEC,
    ) as conn:
        exists = conn.execute(
            "SELECT 1 FROM pg_database WHERE datname = %s", (database,)
        ).fetchone()
        if exists is not None:
            return
        # Two creators racing: the loser gets 42P04, or 23505 from pg_database's unique index.
        with contextlib.suppress(errors.DuplicateDatabase, errors.UniqueViolation):
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
