"""Processes and setup: ``migrate``, ``worker``, ``serve`` and ``demo``."""

from __future__ import annotations

import shlex
import signal
from enum import StrEnum
from typing import Any

import typer

from .. import logs
from ..errors import ConfigurationError
from ..logs import LogFormat
from ..settings import Settings
from .base import AsJson, DbUrl, command, emit, err, out, progress, resolve_database_url


class LogFormatChoice(StrEnum):
    text = "text"
    json = "json"


FORMATS: dict[str, LogFormat] = {"text": "text", "json": "json"}
LogFormatOpt = typer.Option(
    None,
    "--log-format",
    help="log lines on stderr: text (rich on a terminal) or json, one object per line"
    " (else DBOS_AGENTS_LOG_FORMAT, else text)",
)


AppSpec = typer.Option(
    ...,
    "--app",
    envvar="DBOS_AGENTS_APP",
    help="module:attr of an AgentRuntime or a function returning one",
)


@command(panel="Setup and processes")
def migrate(
    database_url: str | None = DbUrl,
    app_role: str | None = typer.Option(
        None,
        "--app-role",
        help="create/grant an application role that row-level security restricts",
    ),
    as_json: bool = AsJson,
) -> None:
    """Create or upgrade the dbos_agents schema (also done by every worker at launch).

    With no database configured this creates the embedded Postgres too.
    """
    from ..store.db import create_sync_engine
    from ..store.migrate import current_version, prepare_database
    from ..store.roles import grant_app_role

    settings = Settings()
    url = resolve_database_url(database_url)
    with progress("applying migrations"):
        prepare_database(
            url,
            connect_timeout=settings.connect_timeout_sec,
            system_schema=settings.dbos_system_schema,
        )
    engine = create_sync_engine(url, pool_size=1)
    try:
        version = current_version(engine)
        created = grant_app_role(engine, app_role) if app_role else None
    finally:
        engine.dispose()
    if as_json:
        emit({"dbos_agents_version": version, "app_role": app_role, "app_role_created": created})
        return
    out.print(f"dbos and dbos_agents schemas are current (dbos_agents version {version})")
    if app_role:
        out.print(
            f"application role {app_role} {'created and ' if created else ''}granted;"
            f" GRANT {app_role} TO <your login role>, then name the user per transaction"
            " (dbos_agents.store.roles.set_identity)",
            markup=False,
        )


@command(panel="Setup and processes")
def worker(
    app_spec: str = AppSpec,
    database_url: str | None = typer.Option(
        None, "--database-url", help="Postgres URL (else the app's, else the embedded one)"
    ),
    log_format: LogFormatChoice | None = LogFormatOpt,
    as_json: bool = AsJson,
) -> None:
    """Run a long-lived worker: launch DBOS, recover own sessions, consume the agent queue.

    It logs a line when a session's run starts, waits and ends (DBOS_AGENTS_LOG_LEVEL=WARNING
    for problems only). SIGTERM or Ctrl-C drains it (running steps finish) and it exits 0.
    With --json only errors change (one JSON document); the ready line stays as it is.
    """
    from ..worker import run_worker

    run_worker(
        app_spec,
        database_url=lambda configured: resolve_database_url(database_url, configured=configured),
        log_format=None if log_format is None else FORMATS[log_format.value],
    )


@command(panel="Setup and processes")
def serve(
    host: str | None = typer.Option(None, "--host", help="bind address (default 127.0.0.1)"),
    port: int | None = typer.Option(None, "--port"),
    auth: str | None = typer.Option(
        None, "--auth", help="module:function of an authenticate hook (see the README)"
    ),
    allow_unauthenticated: bool = typer.Option(
        False, "--allow-unauthenticated", help="built-in session tokens only; logs a warning"
    ),
    workers: int | None = typer.Option(
        None,
        "--workers",
        min=1,
        help="server processes on the one port, each with its own event loop and connections"
        " (default 1, or DBOS_AGENTS_SERVER_WORKERS)",
    ),
    mcp: bool = typer.Option(
        False,
        "--mcp",
        help="also serve the agents as MCP tools at /mcp (streamable HTTP; needs the mcp"
        " extra and DBOS_AGENTS_SERVER_SECRET; docs/mcp-serve.md)",
    ),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Run the HTTP API (stateless; run as many as you like behind a load balancer).

    It needs --auth or --allow-unauthenticated (or their settings). --mcp also serves the
    agents as MCP tools (same auth). SIGTERM shuts it down gracefully (exit 0). With --json only errors change (one JSON document).
    """
    from ..server import ServerSettings
    from ..server import serve as run_server
    from ..server.auth import load_authenticate

    overrides: dict[str, Any] = {}
    if host is not None:
        overrides["host"] = host
    if port is not None:
        overrides["port"] = port
    if allow_unauthenticated:
        overrides["allow_unauthenticated"] = True
    if database_url is not None:
        overrides["database_url"] = database_url
    if workers is not None:
        overrides["workers"] = workers
    if mcp:
        overrides["mcp"] = True
    if auth is not None:
        overrides["authenticate"] = auth  # how the processes of --workers find it
    settings = ServerSettings(**overrides)
    hook = None if auth is None else load_authenticate(auth)
    if hook is None and not settings.authenticate and not settings.allow_unauthenticated:
        raise ConfigurationError(
            "refusing to serve without authentication: pass --auth module:function, or"
            " --allow-unauthenticated on a trusted network"
            " (settings: DBOS_AGENTS_SERVER_AUTHENTICATE, DBOS_AGENTS_SERVER_ALLOW_UNAUTHENTICATED=1)"
        )
    check_port_free(settings.host, settings.port)  # before the database: fail in a second
    if settings.database_url is None:
        url = resolve_database_url(None)
        settings = settings.model_copy(update={"database_url": url})
    signal.signal(signal.SIGTERM, _drained)
    logs.configure("WARNING")  # the server's warnings as lines; uvicorn logs requests itself
    try:
        run_server(settings, authenticate=hook if settings.workers == 1 else None)
    except SystemExit as exc:  # uvicorn's startup failure is 3, our already_completed
        if exc.code != 3:
            raise
        raise RuntimeError("the HTTP server did not start (its log above says why)") from None


class PortInUseError(ConfigurationError):
    """``serve``: the address is taken (another server, or one left running). The CLI's
    own: no library call raises it, so it stays out of the public ``errors``."""

    code = "PORT_IN_USE"


def check_port_free(host: str, port: int) -> None:
    """Bind the address as uvicorn will (``SO_REUSEADDR``), then let it go: a busy port
    is ``PortInUseError`` (exit 14) naming it, not uvicorn's startup failure (exit 3)."""
    import errno
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno != errno.EADDRINUSE:
                raise ConfigurationError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
            raise PortInUseError(
                f"{host}:{port} is already in use (another server, or one left running):"
                " stop it or pass --port"
            ) from exc


def _drained(signum: int, frame: object) -> None:
    """uvicorn shuts down gracefully on SIGTERM, then re-raises it to the handler it found:
    this one, so a drained server exits 0 like a drained worker."""
    raise typer.Exit(0)


@command(panel="Setup and processes")
def demo(database_url: str | None = DbUrl, as_json: bool = AsJson) -> None:
    """Run the support-desk example with ScriptedModel; embedded Postgres by default.

    A real worker is SIGKILLed after the refund ran and a fresh one resumes the session
    without paying twice. It ends with next steps that run as printed.
    """
    from ..demo import demo as run_demo

    settings = Settings()
    url = resolve_database_url(database_url)
    flag = f" --database-url {shlex.quote(database_url)}" if database_url else ""
    summary = run_demo(url, settings, console=err if as_json else out, url_flag=flag)
    if as_json:
        emit(summary)
