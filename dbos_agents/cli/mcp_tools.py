"""``dbos-agents mcp tools URL_OR_COMMAND``: an MCP server's tools as an agent would get
them, with their hints and the policy a run applies to each (whether a call cut by a crash
runs again), before the server goes into an agent."""

from __future__ import annotations

import asyncio
import shlex
from datetime import timedelta

import typer
from rich.markup import escape
from rich.table import Table

from ..errors import InvalidRequestError
from ..mcp import Hints, Listing, MCPServer
from .base import AsJson, Command, Group, app, emit, out

mcp_app = typer.Typer(
    cls=Group, no_args_is_help=True, help="MCP servers: what an agent would get from one."
)
app.add_typer(mcp_app, name="mcp", rich_help_panel="Setup and processes")


Headers = typer.Option(
    [], "--header", "-H", help="an HTTP header for the server, NAME=VALUE (repeatable)"
)


def _hints(h: Hints) -> dict[str, bool | None]:
    return {
        "readOnlyHint": h.read_only,
        "destructiveHint": h.destructive,
        "idempotentHint": h.idempotent,
        "openWorldHint": h.open_world,
    }


async def _list(server: MCPServer) -> Listing:
    from ..mcp import wire

    try:
        return await wire.list_tools(server)
    finally:
        await wire.close_all()


@mcp_app.command("tools", cls=Command)
def tools(
    target: str = typer.Argument(
        ..., help="a streamable-HTTP URL, or the command that runs the server over stdio"
    ),
    trust_hints: bool = typer.Option(
        False, "--trust-hints", help="apply the policy of MCPServer(..., trust_hints=True)"
    ),
    header: list[str] = Headers,
    timeout: float = typer.Option(30.0, "--timeout", help="seconds to wait for the server"),
    as_json: bool = AsJson,
) -> None:
    """List an MCP server's tools, their hints and the retry policy a run would apply.

    A server that does not answer is MCP_SERVER_ERROR (exit 18). The list is read once,
    as a run reads it: nothing is cached.
    """
    headers: dict[str, str] = {}
    for h in header:
        name, sep, value = h.partition("=")
        if not sep or not name:
            raise InvalidRequestError(f"--header {h!r}: expected NAME=VALUE")
        headers[name] = value
    spec: str | list[str] = target if target.startswith(("http://", "https://")) else []
    if not spec:
        spec = shlex.split(target)
    server = MCPServer(
        spec,
        name="server",
        trust_hints=trust_hints,
        headers=headers or None,
        timeout=timedelta(seconds=timeout),
    )
    listing = asyncio.run(_list(server))
    rows: list[dict[str, object]] = []
    table = Table("tool", "hints", "after a crash mid-call", "why", box=None, pad_edge=False)
    for t in listing.tools:
        policy = server.policy(t)
        hints = _hints(t.hints)
        again = "runs again" if policy.retry else "at most once"
        rows.append(
            {"name": t.name, "description": t.description, "hints": hints,
             "runs_again": policy.retry, "reason": policy.reason}
        )  # fmt: skip
        said = ", ".join(k for k, v in hints.items() if v) or "-"
        table.add_row(escape(t.name), said, again, escape(policy.reason))
    if as_json:
        emit({"tools": rows, "skipped": listing.skipped})
        return
    out.print(table)
    for name, why in listing.skipped.items():
        out.print(f"skipped {escape(name)}: {escape(why)}", soft_wrap=True)
