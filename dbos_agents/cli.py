"""The ``dbos-agents`` command line: a thin shell over the Python API."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .client import AgentClient
from .errors import DbosAgentsError, InvalidRequestError, InvalidResultError
from .records import SubmitOutcome
from .settings import Settings

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)
err = Console(stderr=True)
out = Console()


def resolve_database_url(url: str | None, settings: Settings) -> str:
    """The URL to use: the option, then ``DBOS_AGENTS_DATABASE_URL``, then embedded pgserver."""
    if url:
        return url
    if settings.database_url:
        return settings.database_url
    from .store.embedded import embedded_database_url

    err.print(
        f"[dim]no database URL set: using the embedded Postgres under {settings.data_dir}/[/]"
    )
    return embedded_database_url(f"{settings.data_dir}/pgdata")


@app.command()
def migrate(
    database_url: str | None = typer.Option(None, "--database-url", help="Postgres URL"),
    app_role: str | None = typer.Option(
        None,
        "--app-role",
        help="create/grant an application role that row-level security restricts",
    ),
) -> None:
    """Create or upgrade the dbos_agents schema (also done by every worker at launch)."""
    from .store.db import create_sync_engine
    from .store.migrate import current_version, prepare_database
    from .store.roles import grant_app_role

    settings = Settings()
    url = resolve_database_url(database_url, settings)
    prepare_database(url, connect_timeout=settings.connect_timeout_sec)
    engine = create_sync_engine(url, pool_size=1)
    try:
        version = current_version(engine)
        created = grant_app_role(engine, app_role) if app_role else None
    finally:
        engine.dispose()
    typer.echo(f"dbos and dbos_agents schemas are current (dbos_agents version {version})")
    if app_role:
        typer.echo(
            f"application role {app_role} {'created and ' if created else ''}granted;"
            f" GRANT {app_role} TO <your login role>, then name the user per transaction"
            " (dbos_agents.store.roles.set_identity)"
        )


@app.command()
def worker(
    app_spec: str = typer.Option(..., "--app", help="module:attr of an AgentRuntime or factory"),
) -> None:
    """Run a long-lived worker: launch DBOS, recover own sessions, consume the agent queue."""
    from .worker import run_worker

    run_worker(app_spec)


@app.command()
def demo(
    database_url: str | None = typer.Option(None, "--database-url", help="Postgres URL"),
) -> None:
    """Run the support-desk example with ScriptedModel; embedded Postgres by default."""
    from .demo import demo as run_demo

    settings = Settings()
    run_demo(resolve_database_url(database_url, settings), settings)


@app.command()
def serve(
    host: str | None = typer.Option(None, "--host", help="bind address (default 127.0.0.1)"),
    port: int | None = typer.Option(None, "--port"),
    auth: str | None = typer.Option(
        None, "--auth", help="module:function of an authenticate hook (see the README)"
    ),
    allow_unauthenticated: bool = typer.Option(
        False, "--allow-unauthenticated", help="built-in session tokens only; logs a warning"
    ),
    database_url: str | None = typer.Option(None, "--database-url", help="Postgres URL"),
) -> None:
    """Run the HTTP API (stateless; run as many as you like behind a load balancer)."""
    from .server import ServerSettings
    from .server import serve as run_server
    from .server.auth import load_authenticate

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
    run_server(settings, authenticate=hook)


EXIT_CODES: dict[str, int] = {
    "accepted": 0,
    "already_completed": 3,
    "unknown_tool_call": 4,
    "late_answer_after_timeout": 5,
    "INVALID_RESULT": 6,
    "INVALID_REQUEST": 7,
    "NOT_ROOT_SESSION": 7,
}
"""One exit code per submit outcome; 2 for usage, configuration and database errors."""

DbUrl = typer.Option(None, "--database-url", help="Postgres URL (else DBOS_AGENTS_DATABASE_URL)")
AsJson = typer.Option(False, "--json", help="machine-readable output")


def _client(database_url: str | None) -> AgentClient:
    settings = Settings()
    return AgentClient(resolve_database_url(database_url, settings), settings=settings)


def _read_json(value: str | None, path: str | None) -> Any:
    if value is not None and path is not None:
        raise typer.BadParameter("give the result inline or as a file, not both")
    if path is not None:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    elif value is not None:
        text = value
    else:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise typer.BadParameter(f"the result is not valid JSON: {exc}") from exc


def _report(outcome: SubmitOutcome, as_json: bool) -> None:
    if as_json:
        typer.echo(outcome.model_dump_json())
    else:
        reason = f" ({outcome.reason})" if outcome.reason else ""
        out.print(f"{outcome.status}{reason}: {outcome.session_id} / {outcome.tool_call_id}")
    raise typer.Exit(EXIT_CODES[outcome.status])


def _submit_error(exc: DbosAgentsError, as_json: bool) -> None:
    body: dict[str, Any] = {"error": exc.code, "message": str(exc)}
    if isinstance(exc, InvalidResultError):
        body["details"] = exc.errors
    if as_json:
        typer.echo(json.dumps(body))
    else:
        err.print(f"[red]{escape(exc.code)}[/] {escape(str(exc))}")
        for d in body.get("details", []):
            err.print(f"  {escape(str(d['path']))}: {escape(str(d['message']))}")
    raise typer.Exit(EXIT_CODES.get(exc.code, 2))


@app.command()
def submit(
    session_id: str = typer.Argument(..., help="the ROOT session id"),
    tool_call_id: str = typer.Argument(...),
    result: str | None = typer.Option(None, "--result", help="the result as JSON"),
    result_file: str | None = typer.Option(
        None, "--result-file", help="read the JSON result from a file, or '-' for stdin"
    ),
    error: str | None = typer.Option(None, "--error", help="submit an error instead"),
    approve: bool | None = typer.Option(
        None, "--approve/--deny", help="answer an approval instead"
    ),
    reason: str | None = typer.Option(None, "--reason", help="why (approvals)"),
    decided_by: str | None = typer.Option(
        None, "--by", help="who decides (approvals; default: the OS user running this)"
    ),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Submit a client-tool result, an error, or an approval decision.

    Exit codes: 0 accepted, 3 already_completed, 4 unknown_tool_call,
    5 late_answer_after_timeout, 6 invalid result, 7 invalid request, 2 other errors.
    """
    chosen = [result is not None or result_file is not None, error is not None, approve is not None]
    if sum(chosen) != 1:
        raise typer.BadParameter(
            "give exactly one of --result/--result-file, --error, --approve/--deny"
        )
    value = _read_json(result, result_file)
    with _client(database_url) as client:
        try:
            if approve is not None:
                who = decided_by or f"cli:{getpass.getuser()}"
                outcome = client.submit_approval(
                    session_id, tool_call_id, approve, reason, decided_by=who
                )
            elif error is not None:
                outcome = client.submit_tool_result(session_id, tool_call_id, error=error)
            else:
                outcome = client.submit_tool_result(session_id, tool_call_id, result=value)
        except InvalidRequestError as exc:
            _submit_error(exc, as_json)
    _report(outcome, as_json)


@app.command()
def fail(
    session_id: str = typer.Argument(..., help="the ROOT session id"),
    tool_call_id: str = typer.Argument(...),
    error: str = typer.Option(..., "--error", help="the error the model will read"),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Force-fail a stuck client-tool call or approval with an error result."""
    with _client(database_url) as client:
        outcome = client.fail(session_id, tool_call_id, error)
    _report(outcome, as_json)


@app.command()
def pending(
    session_id: str | None = typer.Option(None, "--session", help="root session id"),
    tenant_id: str | None = typer.Option(None, "--tenant"),
    user_id: str | None = typer.Option(None, "--user"),
    kind: str | None = typer.Option(None, "--kind", help="client or approval"),
    include_resolved: bool = typer.Option(False, "--all", help="include tombstones"),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """List pending client-tool calls and approvals, oldest deadline first."""
    if kind not in (None, "client", "approval"):
        raise typer.BadParameter("--kind is client or approval")
    with _client(database_url) as client:
        rows = client.pending(
            session_id=session_id,
            tenant_id=tenant_id,
            user_id=user_id,
            kind=kind,  # type: ignore[arg-type]
            include_resolved=include_resolved,
        )
    if as_json:
        typer.echo(json.dumps([r.model_dump(mode="json") for r in rows]))
        return
    table = Table(title=f"{len(rows)} pending call(s)")
    for col in ("root session", "tool call", "kind", "tool", "status", "deadline", "owner"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            r.root_session_id,
            r.tool_call_id,
            r.kind,
            r.tool,
            r.status,
            r.deadline.isoformat(timespec="seconds"),
            r.owner_session_id,
        )
    out.print(table)


@app.command()
def interrupt(
    session_id: str = typer.Argument(...),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Interrupt a session and its sub-agents; its waits end, late submits are refused."""
    with _client(database_url) as client:
        outcome = client.interrupt(session_id)
    if as_json:
        typer.echo(outcome.model_dump_json())
    else:
        out.print(
            f"interrupted {len(outcome.interrupted_sessions)} session(s), "
            f"cancelled {len(outcome.cancelled_calls)} pending call(s)"
        )


def main() -> None:
    try:
        app()
    except DbosAgentsError as exc:
        err.print(f"[red]error[/] {escape(f'[{exc.code}] {exc}')}")
        sys.exit(2)


if __name__ == "__main__":
    main()
