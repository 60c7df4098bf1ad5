"""The worker app of tests/mcp: agents whose tools come from the test MCP server
(``tests/mcp/server_app.py``), found at ``MCP_TEST_URL`` (streamable HTTP) or, with
``MCP_TEST_STDIO`` set to a witness path, run over stdio. The scripted model calls the tool
its agent is named after (``call_<tool>``), with the arguments in the session's first
message (JSON), then answers with what the tool said."""

from __future__ import annotations

import json
import os
import sys
from datetime import timedelta

from dbos_agents import Agent, AgentRuntime, ModelResponse
from dbos_agents.mcp import MCPServer
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import Witness

TOOLS = ("create_ticket", "lookup", "set_status", "refund", "broken", "lookup_v2")


def server() -> MCPServer:
    stdio = os.environ.get("MCP_TEST_STDIO")
    if stdio:
        command = [sys.executable, "-m", "tests.mcp.server_app", "--witness", stdio]
        return MCPServer(command, name="desk", trust_hints=True)
    url = os.environ.get("MCP_TEST_URL", "http://127.0.0.1:9/mcp")
    return MCPServer(url, name="desk", trust_hints=True, timeout=timedelta(seconds=20))


def _respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        tool = request.agent.removeprefix("call_").removeprefix("down_").removeprefix("hurry_")
        first = next(m for m in request.messages if m.role == "user")
        return calls(call(tool, json.loads(first.content or "{}")))
    tool_msg = next(m for m in reversed(request.messages) if m.role == "tool")
    return "tool said: " + (tool_msg.content or "")


def _on_call(request: ModelRequest) -> None:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    tools = sorted(t.name for t in request.tools)
    Witness().record("model", turn=turn, agent=request.agent, tools=tools, pid=os.getpid())


def runtime() -> AgentRuntime:
    desk = server()
    agents = [Agent(f"call_{t}", tools=[desk], tool_timeout=timedelta(minutes=10)) for t in TOOLS]
    # a server nobody listens for: its runs go on without its tools
    gone = MCPServer("http://127.0.0.1:9/mcp", name="gone", timeout=timedelta(seconds=2))
    agents.append(Agent("down_lookup", tools=[gone]))
    # questions time out fast: no answer is a cancel
    agents.append(Agent("hurry_refund", tools=[desk], tool_timeout=timedelta(seconds=2)))
    return AgentRuntime(agents, ScriptedModel(respond=_respond, on_call=_on_call))
