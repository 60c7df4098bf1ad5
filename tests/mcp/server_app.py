"""A test MCP server (the ``mcp`` SDK's ``MCPServer``) with a witness of every execution.

Run it over streamable HTTP (``--port``) or stdio (default). Every tool body appends a line
``<tool> <key>`` to the witness file before it returns (``key``: the idempotency key the
client sent in ``_meta``, else ``-``), so a test counts executions per call across worker
crashes. ``--variant b`` serves a different tool list (a tool gone, a tool added), as a
server that changed between a crash and its recovery.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve
from mcp.server.request_state import RequestStateSecurity
from mcp_types import ToolAnnotations
from pydantic import BaseModel

KEY_META = "io.dbos-agents/idempotency-key"


class Approval(BaseModel):
    approve: bool
    note: str = ""


async def ask_approval(cents: int) -> Elicit[Approval]:
    return Elicit(f"Refund {cents} cents?", Approval)


def build(witness: str, variant: str, state_key: str) -> MCPServer:
    server = MCPServer(
        "test-tools", request_state_security=RequestStateSecurity(keys=[state_key.encode()])
    )

    def saw(tool: str, ctx: Context) -> None:
        meta = ctx.request_context.meta or {}
        key = getattr(meta, "get", lambda *_: None)(KEY_META) or "-"
        with open(witness, "a") as f:
            f.write(f"{tool} {key}\n")
            f.flush()
            os.fsync(f.fileno())

    @server.tool(annotations=ToolAnnotations(destructiveHint=True, readOnlyHint=False))
    async def create_ticket(title: str, ctx: Context, delay: float = 0.0) -> str:
        """Open a support ticket (an effect: run it once)."""
        saw("create_ticket", ctx)
        await asyncio.sleep(delay)
        return f"ticket opened: {title}"

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
    async def lookup(query: str, ctx: Context, delay: float = 0.0) -> dict[str, str]:
        """Look a customer up (reads only)."""
        saw("lookup", ctx)
        await asyncio.sleep(delay)
        return {"query": query, "customer": "Ada"}

    @server.tool(annotations=ToolAnnotations(idempotentHint=True, destructiveHint=True))
    async def set_status(ticket: str, status: str, ctx: Context, delay: float = 0.0) -> str:
        """Set a ticket's status (the same call twice changes nothing more)."""
        saw("set_status", ctx)
        await asyncio.sleep(delay)
        return f"{ticket} is {status}"

    @server.tool(annotations=ToolAnnotations(destructiveHint=True))
    async def refund(
        cents: int, approval: Annotated[Approval, Resolve(ask_approval)], ctx: Context
    ) -> str:
        """Refund a customer, after the user approves."""
        saw("refund", ctx)
        if not approval.approve:
            return "refund not approved"
        return f"refunded {cents} cents ({approval.note})"

    @server.tool()
    async def broken(ctx: Context) -> str:
        """Always fails (a tool error the model reads)."""
        saw("broken", ctx)
        raise ValueError("the ticket system is read-only today")

    if variant == "b":
        server.remove_tool("lookup")

        @server.tool(annotations=ToolAnnotations(readOnlyHint=True))
        async def lookup_v2(query: str, ctx: Context) -> str:
            """Look a customer up (version 2)."""
            saw("lookup_v2", ctx)
            return query

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--witness", required=True)
    parser.add_argument("--port", type=int, default=0, help="streamable HTTP; 0: stdio")
    parser.add_argument("--variant", default="a")
    parser.add_argument("--state-key", default="test-state-key-0123456789abcdef-0123456789")
    a = parser.parse_args()
    server = build(a.witness, a.variant, a.state_key)
    if a.port:
        server.run("streamable-http", host="127.0.0.1", port=a.port)
    else:
        server.run("stdio")


if __name__ == "__main__":
    main()
