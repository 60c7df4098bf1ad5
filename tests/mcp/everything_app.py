"""The worker app of tests/mcp/test_everything.py: the reference MCP server
(``@modelcontextprotocol/server-everything``, pinned in js/package.json) over stdio and, at
``MCP_EVERYTHING_URL``, over streamable HTTP. The scripted model calls three of its tools
in one turn (one with arguments its schema refuses), then answers with what they said."""

from __future__ import annotations

import os
from pathlib import Path

from dbos_agents import Agent, AgentRuntime, ModelResponse
from dbos_agents.mcp import MCPServer
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

SERVER = (
    Path(__file__).resolve().parents[2]
    / "js/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
)


def _respond(request: ModelRequest) -> str | ModelResponse:
    if not any(m.role == "assistant" for m in request.messages):
        names = sorted(t.name for t in request.tools)
        return calls(
            call("echo", {"message": f"tools: {','.join(names)}"}),
            call("get-sum", {"a": 2, "b": 40}),
            call("echo", {"text": "the schema wants message"}),
        )
    said = [m.content or "" for m in request.messages if m.role == "tool"]
    return "\n---\n".join(said)


def runtime() -> AgentRuntime:
    stdio = MCPServer(["node", str(SERVER), "stdio"], name="everything")
    http = MCPServer(os.environ.get("MCP_EVERYTHING_URL", "http://127.0.0.1:9/mcp"), name="ev")
    agents = [Agent("everything_stdio", tools=[stdio]), Agent("everything_http", tools=[http])]
    return AgentRuntime(agents, ScriptedModel(respond=_respond))
