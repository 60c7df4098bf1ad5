"""``fork``: a new session from an earlier turn of another, nothing before it run again
(``AgentClient.fork``)."""

from __future__ import annotations

import typer
from rich.markup import escape

from .base import AsJson, DbUrl, command, emit, open_client, out
from .follow import exit_for, follow
from .sessions import Follow, Full


@command(panel="Sessions")
def fork(
    session_id: str = typer.Argument(..., help="the session to fork (a sub-agent's: its root)"),
    message: str = typer.Argument(..., help="the new session's next user message"),
    at_turn: int = typer.Option(
        ..., "--at-turn", help="the turn to fork at: the n-th assistant message, from 1"
    ),
    follow_it: bool = Follow,
    full: bool = Full,
    database_url: str | None = DbUrl,
    as_json: bool = AsJson,
) -> None:
    """Fork a session after turn N and continue it with MESSAGE; prints the new session id.

    The transcript, tool results and state up to turn N are copied as recorded: no model
    call and no tool call before the fork point runs again. The original is untouched.
    A turn the session does not have is TURN_NOT_FOUND (exit 15), and nothing is created.
    """
    with open_client(database_url) as client:
        new = client.fork(session_id, at_turn=at_turn, message=message)
        info = client.session(new)
        if as_json:
            emit(
                {
                    "event": "forked",
                    "session_id": new,
                    "forked_from": info.forked_from,
                    "at_turn": at_turn,
                    "agent": info.agent,
                }
            )
        else:
            out.print(
                f"forked session [bold]{escape(new)}[/] from {escape(str(info.forked_from))}"
                f" at turn {at_turn} ({escape(info.agent)}), queued for a worker",
                soft_wrap=True,
            )
        if follow_it:
            after = client.history(new, at_turn=at_turn)[-1].seq
            exit_for(
                follow(
                    client, new, after=after, as_json=as_json, full=full, database_url=database_url
                )
            )
