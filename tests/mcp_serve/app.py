"""The worker app of the agents-as-MCP-tools tests (``tests.mcp_serve.app:runtime``).

- ``chat``: answers ``echo <turn>: <last user message>``.
- ``asker``: calls the client tool ``confirm`` (a flat result: a form of its fields), then
  reports the result.
- ``planner``: calls the client tool ``plan``, whose result nests (a form of one JSON field).
- ``closer``: calls ``close_account``, which needs a human's approval.
- ``breaker``: its model fails, so the run ends ``failed``.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, client_tool
from dbos_agents.errors import ModelError
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from tests.http.app import close_account, confirm


class PlanIn(BaseModel):
    goal: str


class Step(BaseModel):
    title: str
    minutes: int


class PlanOut(BaseModel):
    steps: list[Step]


plan = client_tool("plan", input=PlanIn, output=PlanOut)


def _turn(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def _last(request: ModelRequest, role: str) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == role), "")


def respond(request: ModelRequest) -> str | ModelResponse:
    first = _turn(request) == 0 or request.messages[-1].role == "user"
    if request.agent == "chat":
        return f"echo {_turn(request)}: {_last(request, 'user')}"
    if request.agent == "breaker":
        raise ModelError("the model is down for this test")
    if request.agent == "asker":
        if first:
            return calls(call("confirm", {"question": _last(request, "user")}))
        return f"asker got: {_last(request, 'tool')}"
    if request.agent == "planner":
        if first:
            return calls(call("plan", {"goal": _last(request, "user")}))
        return f"planner got: {_last(request, 'tool')}"
    if request.agent == "closer":
        if first:
            return calls(call("close_account", {"account_id": "acc-1"}))
        return f"closer got: {_last(request, 'tool')}"
    raise AssertionError(f"no script for {request.agent}")


CHAT = Agent("chat", "Echoes the message back, numbered by turn.")
AGENTS = [
    CHAT,
    Agent("asker", "Asks the user to confirm", tools=[confirm], tool_timeout=timedelta(minutes=10)),
    Agent("planner", "Asks the user for a plan", tools=[plan], tool_timeout=timedelta(minutes=10)),
    Agent("closer", "Closes accounts", tools=[close_account]),
    Agent("breaker", "Always fails"),
]


def runtime() -> AgentRuntime:
    return AgentRuntime(AGENTS, ScriptedModel(respond=respond))
