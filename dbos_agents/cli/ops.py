"""Processes and setup: ``migrate``, ``worker``, ``serve`` and ``demo``."""

from __future__ import annotations

import shlex
import signal
from typing import Any

import typer

from ..errors import ConfigurationError
from ..settings import Settings
from .base import AsJson, DbUrl, command, emit, err, out, progress, resolve_database_url

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
    url = resolve_database_url(database_url, create=True)
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
    as_json: bool = AsJson,
) -> None:
    """Run a long-lived worker: launch DBOS, recover own sessions, consume the agent queue.

    SIGTERM or Ctrl-C drains it (running steps finish) and it exits 0. With --json only
    errors change (one JSON document); the ready line stays as it is.
    """
    from ..worker import run_worker

    run_worker(
        app_spec,
        database_url=lambda configured: resolve_database_url(database_url, configured=configured),
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
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Run the HTTP API (stateless; run as many as you like behind a load balancer).

    It needs --auth or --allow-unauthenticated (or their settings). SIGTERM shuts it down
    gracefully (exit 0). With --json only errors change (one JSON document).
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
    settings = ServerSettings(**overrides)
    hook = None if auth is None else load_authenticate(auth)
    if hook is None and not settings.authenticate and not settings.allow_unauthenticated:
        raise ConfigurationError(
            "refusing to serve without authentication: pass --auth module:function, or"
            " --allow-unauthenticated on a trusted network"
            " (settings: DBOS_AGENTS_SERVER_AUTHENTICATE, DBOS_AGENTS_SERVER_ALLOW_UNAUTHENTICATED=1)"
        )
    if settings.database_url is None:
        url = resolve_database_url(None)
        settings = settings.model_copy(update={"database_url": url})
    signal.signal(signal.SIGTERM, _drained)
    run_server(settings, authenticate=hook)


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
    url = resolve_database_url(database_url, create=True)
    flag = f" --database-url {shlex.quote(database_url)}" if database_url else ""
    summary = run_demo(url, settings, console=err if as_json else out, url_flag=flag)
    if as_json:
        emit(summary)
