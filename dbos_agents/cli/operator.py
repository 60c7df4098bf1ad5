"""Answering waits: ``submit``, ``fail``, ``pending`` and ``interrupt``."""

from __future__ import annotations

import getpass
import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from ..records import SubmitOutcome
from . import render
from .base import EXIT_CODES, AsJson, DbUrl, command, emit, open_client, out


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
        style = "green" if outcome.status == "accepted" else "yellow"
        out.print(
            f"[{style}]{outcome.status}[/]{escape(reason)}:"
            f" {escape(outcome.session_id)} / {escape(outcome.tool_call_id)}"
        )
    raise typer.Exit(EXIT_CODES.get(outcome.status, 0))


@command(panel="Waits")
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
    5 late_answer_after_timeout, 6 invalid result, 7 invalid request (see --help of
    dbos-agents for the rest).
    """
    chosen = [result is not None or result_file is not None, error is not None, approve is not None]
    if sum(chosen) != 1:
        raise typer.BadParameter(
            "give exactly one of --result/--result-file, --error, --approve/--deny"
        )
    value = _read_json(result, result_file)
    with open_client(database_url) as client:
        if approve is not None:
            who = decided_by or f"cli:{getpass.getuser()}"
            outcome = client.submit_approval(
                session_id, tool_call_id, approve, reason, decided_by=who
            )
        elif error is not None:
            outcome = client.submit_tool_result(session_id, tool_call_id, error=error)
        else:
            outcome = client.submit_tool_result(session_id, tool_call_id, result=value)
    _report(outcome, as_json)


@command(panel="Waits")
def fail(
    session_id: str = typer.Argument(..., help="the ROOT session id"),
    tool_call_id: str = typer.Argument(...),
    error: str = typer.Option(..., "--error", help="the error the model will read"),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Force-fail a stuck client-tool call or approval with an error result."""
    with open_client(database_url) as client:
        outcome = client.fail(session_id, tool_call_id, error)
    _report(outcome, as_json)


@command(panel="Waits")
def pending(
    session_id: str | None = typer.Option(None, "--session", help="root session id"),
    tenant_id: str | None = typer.Option(None, "--tenant"),
    user_id: str | None = typer.Option(None, "--user"),
    kind: str | None = typer.Option(None, "--kind", help="client or approval"),
    include_resolved: bool = typer.Option(False, "--all", help="include tombstones"),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """List pending client-tool calls and approvals, oldest deadline first.

    Each with its arguments, the result it expects and a submit line that answers it (a
    client tool's with an example result that validates). --json: the rows, schemas whole.
    """
    if kind not in (None, "client", "approval"):
        raise typer.BadParameter("--kind is client or approval")
    with open_client(database_url) as client:
        rows = client.pending(
            session_id=session_id,
            tenant_id=tenant_id,
            user_id=user_id,
            kind=kind,  # type: ignore[arg-type]
            include_resolved=include_resolved,
        )
    if as_json:
        emit([r.model_dump(mode="json") for r in rows])
        return
    render.print_pending(out, rows, database_url=database_url)


@command(panel="Waits")
def interrupt(
    session_id: str = typer.Argument(...),
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Interrupt a session and its sub-agents; its waits end, late submits are refused."""
    with open_client(database_url) as client:
        outcome = client.interrupt(session_id)
    if as_json:
        typer.echo(outcome.model_dump_json())
    else:
        out.print(
            f"interrupted {len(outcome.interrupted_sessions)} session(s), "
            f"cancelled {len(outcome.cancelled_calls)} pending call(s)"
        )
