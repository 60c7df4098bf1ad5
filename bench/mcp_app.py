"""bench/mcp_call.py's two processes: the MCP server (``python bench/mcp_app.py PORT``, the
``mcp`` SDK's ``MCPServer`` over streamable HTTP, one tool that does nothing) and the
worker app (``dbos-agents worker --app mcp_app:runtime``): agent ``mcp`` calls that tool
``BENCH_MCP_CALLS`` times (default 1), agent ``plain`` a local no-op ``@tool`` as often,
each then answers."""

from __future__ import annotations

import os
import sys

from dbos_agents import Agent, AgentRuntime, ModelResponse, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

URL_ENV, CALLS_ENV = "BENCH_MCP_URL", "BENCH_MCP_CALLS"


@tool
async def stamp(note: str) -> str:
    """Side-effecting (at most once per call), and does nothing."""
    return note


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < int(os.environ.get(CALLS_ENV, "1")):
        return calls(call("stamp", {"note": f"n{turn}"}))
    return "done"


def runtime() -> AgentRuntime:
    from dbos_agents.mcp import MCPServer

    server = MCPServer(os.environ[URL_ENV], name="bench")
    n = int(os.environ.get(CALLS_ENV, "1"))
    agents = [Agent("mcp", tools=[server], max_turns=n + 2), Agent("plain", tools=[stamp])]
    return AgentRuntime(agents, ScriptedModel(respond=respond))


def serve(port: int) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")

    @server.tool()
    async def stamp(note: str) -> str:  # the same name: the same scripted model calls it
        """Does nothing (destructive for all the client knows: at most once)."""
        return note

    server.run("streamable-http", host="127.0.0.1", port=port)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
