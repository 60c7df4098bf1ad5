"""The app the HTTP tests run in a worker subprocess (``tests.http.app:runtime``).

- ``chat``: answers ``echo <turn>: <last user message>``.
- ``asker``: calls the client tool ``confirm`` (10 minutes), then reports the result.
- ``impatient``: calls ``confirm_fast`` (1 second), so a late submit can be tested.
- ``closer``: calls ``close_account``, which needs a human's approval.
"""

from __future__ import annotations

from datetime import timedelta

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, client_tool, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls


class ConfirmIn(BaseModel):
    question: str


class ConfirmOut(BaseModel):
    ok: bool
    note: str = ""


confirm = client_tool("confirm", input=ConfirmIn, output=ConfirmOut)
confirm_fast = client_tool(
    "confirm_fast", input=ConfirmIn, output=ConfirmOut, timeout=timedelta(seconds=1)
)


@tool(requires_approval=True)
async def close_account(ctx: ToolContext, account_id: str) -> dict[str, str]:
    """Close an account (needs a human's approval)."""
    return {"closed": account_id}


def _turn(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def _last(request: ModelRequest, role: str) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == role), "")


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = _turn(request)
    if request.agent == "chat":
        return f"echo {turn}: {_last(request, 'user')}"
    first = turn == 0 or request.messages[-1].role == "user"
    if request.agent == "asker":
        if first:
            return calls(call("confirm", {"question": _last(request, "user")}))
        return f"asker got: {_last(request, 'tool')}"
    if request.agent == "impatient":
        if first:
            return calls(call("confirm_fast", {"question": "quick?"}))
        return f"impatient got: {_last(request, 'tool')}"
    if request.agent == "closer":
        if first:
            return calls(call("close_account", {"account_id": "acc-1"}))
        return f"closer got: {_last(request, 'tool')}"
    raise AssertionError(f"no script for {request.agent}")


def runtime() -> AgentRuntime:
    agents = [
        Agent("chat", "echoes"),
        Agent("asker", "asks the user", tools=[confirm], tool_timeout=timedelta(minutes=10)),
        Agent("impatient", "asks, briefly", tools=[confirm_fast]),
        Agent("closer", "closes accounts", tools=[close_account]),
    ]
    return AgentRuntime(agents, ScriptedModel(respond=respond))
