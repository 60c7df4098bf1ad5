"""Sessions: ``start``, ``send``, ``sessions``, ``show`` and ``follow``."""

from __future__ import annotations

from enum import StrEnum

import typer
from rich.markup import escape

from ..errors import UnknownAgentError
from . import render
from .base import AsJson, DbUrl, command, emit, err, open_client, out
from .follow import exit_for, follow


class Status(StrEnum):
    queued = "queued"
    running = "running"
    completed = "completed"
    failed = "failed"
    interrupted = "interrupted"
    max_turns = "max_turns"
    budget_exhausted = "budget_exhausted"


StatusOpt = typer.Option(None, "--status")
Follow = typer.Option(False, "--follow", "-f", help="then follow the run until it ends")
Full = typer.Option(False, "--full", help="do not shorten long tool results and arguments")


def _check_agent(agent: str, app_spec: str | None) -> None:
    """With ``--app``, refuse an agent name the workers' runtime does not have."""
    if app_spec is None:
        return
    from ..worker import load_runtime

    runtime = load_runtime(app_spec)
    if agent not in runtime.agents:
        raise UnknownAgentError(agent, list(runtime.agents))


def _started(sid: str, agent: str, verb: str, as_json: bool, following: bool) -> None:
    if as_json:
        emit({"event": verb, "session_id": sid, "agent": agent})
        return
    out.print(
        f"{verb} session [bold]{escape(sid)}[/] ({escape(agent)}), queued for a worker",
        soft_wrap=True,  # the id is copied: never broken across lines
    )
    if not following:
        out.print(f"[dim]follow it: dbos-agents follow {escape(sid)}[/]", soft_wrap=True)


@command(panel="Sessions")
def start(
    agent: str = typer.Argument(..., help="the agent's name"),
    message: str = typer.Argument(..., help="the first user message"),
    app_spec: str | None = typer.Option(
        None,
        "--app",
        envvar="DBOS_AGENTS_APP",
        help="module:attr of the workers' AgentRuntime: refuse unknown agent names now",
    ),
    user_id: str | None = typer.Option(None, "--user"),
    tenant_id: str | None = typer.Option(None, "--tenant"),
    follow_it: bool = Follow,
    full: bool = Full,
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Start a session: enqueue its first run for any worker; prints the session id.

    With --follow it then prints the run's messages until it ends (exit 13 if it did not
    complete). Without --app the agent name is only checked by the worker.
    """
    _check_agent(agent, app_spec)
    with open_client(database_url) as client:
        sid = client.start(agent, message, user_id=user_id, tenant_id=tenant_id)
        _started(sid, agent, "started", as_json, follow_it)
        if follow_it:
            exit_for(follow(client, sid, as_json=as_json, full=full, database_url=database_url))


@command(panel="Sessions")
def send(
    session_id: str = typer.Argument(...),
    message: str = typer.Argument(..., help="the follow-up user message"),
    follow_it: bool = Follow,
    full: bool = Full,
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Continue a finished session with a follow-up message (SESSION_BUSY while it runs)."""
    with open_client(database_url) as client:
        info = client.session(session_id)
        history = client.history(session_id)
        client.send(session_id, message)
        _started(session_id, info.agent, "continued", as_json, follow_it)
        if follow_it:
            after = history[-1].seq if history else 0
            exit_for(
                follow(
                    client,
                    session_id,
                    after=after,
                    as_json=as_json,
                    full=full,
                    database_url=database_url,
                )
            )


@command("sessions", panel="Sessions")
def list_sessions(
    agent: str | None = typer.Option(None, "--agent"),
    status: Status | None = StatusOpt,
    user_id: str | None = typer.Option(None, "--user"),
    tenant_id: str | None = typer.Option(None, "--tenant"),
    limit: int = typer.Option(20, "--limit", "-n", min=1, max=1000),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """List sessions, newest first (sub-agent sessions included)."""
    with open_client(database_url) as client:
        rows = client.sessions(
            agent=agent,
            status=status.value if status is not None else None,
            user_id=user_id,
            tenant_id=tenant_id,
            limit=limit,
        )
        waiting = [q for q in client.queued_runs() if not q.served] if not as_json else []
    if as_json:
        emit([r.model_dump(mode="json") for r in rows])
        return
    if not rows:
        err.print("no sessions match; start one: dbos-agents start AGENT 'message'")
        return
    out.print(render.sessions_table(rows))
    for q in waiting:  # queued, and no live worker runs the agent: say why they wait
        err.print(
            f"{q.runs} run(s) of agent {q.agent!r} queued (oldest {q.oldest_age_sec:.0f}s):"
            " no live worker runs it; they start when one does"
        )


@command(panel="Sessions")
def show(
    session_id: str = typer.Argument(...),
    full: bool = Full,
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Show a session: its state, transcript, tool-call ledger and open waits."""
    with open_client(database_url) as client:
        info = client.session(session_id)
        history = client.history(session_id)
        calls = client.tool_calls(session_id)
        waits = [
            p
            for p in client.pending(session_id=info.root_session_id)
            if p.owner_session_id == session_id
        ]
    if as_json:
        emit(
            {
                "session": info.model_dump(mode="json"),
                "messages": [m.model_dump(mode="json") for m in history],
                "tool_calls": [c.model_dump(mode="json") for c in calls],
                "pending": [p.model_dump(mode="json") for p in waits],
            }
        )
        return
    out.print(render.session_panel(info))
    out.print(render.transcript(history, full=full))
    if calls:
        out.print(render.ledger(calls))
    for p in waits:
        render.print_wait(out, p, database_url=database_url, full=full)


@command("follow", panel="Sessions")
def follow_command(
    session_id: str = typer.Argument(...),
    after: str = typer.Option(
        "0", "--after", help='resume after this cursor: a message seq, or "N.D" from --json'
    ),
    full: bool = Full,
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Print a session's messages, then its replies live as they are written, until its
    run ends (or Ctrl-C).

    Exit 0 if the run completed, 13 if it ended otherwise, 130 on Ctrl-C. With --json:
    JSON lines, each {"event": "delta" | "retract" | "progress" | "message" | "pending" |
    "status", ...}.
    """
    with open_client(database_url) as client:
        exit_for(
            follow(
                client,
                session_id,
                after=after,
                as_json=as_json,
                full=full,
                database_url=database_url,
            )
        )
