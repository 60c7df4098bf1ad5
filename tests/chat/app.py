"""The app the chat-UI tests run in a worker subprocess (``tests.chat.app:runtime``).
Replies stream in pieces of 4 characters, ``CHAT_PACE_SEC`` apart (default 0.01 s).

- ``talker``: answers ``You said: <message>. `` followed by a fixed sentence.
- ``slow``: a 600-character reply, 4 characters every 0.05 s (a worker is killed mid-answer).
- ``asker``: calls the client tool ``confirm`` (run by the browser), then reports its answer.
- ``closer``: calls ``close_account``, which needs a human's approval, then reports.
- ``keeper``: calls the durable tool ``checked_close``, which asks for an approval and then
  the browser's ``confirm`` in the middle of its work, then reports.
- ``delegator``: calls its sub-agent ``deputy`` (``subagent__deputy``), then reports its
  answer. ``deputy`` calls ``close_account`` (a human approves), then the browser's
  ``confirm``, then answers with both results. The waits are the sub-agent's: they reach
  the page through the root session (``delegator``'s). The calls have ids of their own
  (``to-deputy``; ``deputy-close``, ``deputy-confirm``, which the run suffixes with the
  sub-agent's ``@<hash>``), not the scripted default ``call_<turn>_<index>``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from datetime import timedelta

from pydantic import BaseModel

from dbos_agents import (
    APPROVAL,
    Agent,
    AgentRuntime,
    ModelResponse,
    ToolContext,
    client_tool,
    tool,
)
from dbos_agents.models import ModelEvent, ModelRequest, ScriptedModel, call, calls

SENTENCE = "The quick brown fox jumps over the lazy dog."
SLOW_REPLY = " ".join(f"word{n:03d}" for n in range(75))  # 600 characters


class ConfirmIn(BaseModel):
    question: str


class ConfirmOut(BaseModel):
    ok: bool
    note: str = ""


confirm = client_tool(
    "confirm", input=ConfirmIn, output=ConfirmOut, description="Ask the user to confirm."
)


@tool(requires_approval=True)
async def close_account(ctx: ToolContext, account_id: str) -> dict[str, str]:
    """Close an account (needs a human's approval)."""
    return {"closed": account_id}


def _closed(account_id: str) -> dict[str, str]:
    return {"closed": account_id}


@tool(durable=True)
async def checked_close(ctx: ToolContext, account_id: str) -> dict[str, object]:
    """Close an account: a human approves, then the browser confirms, mid-tool."""
    ctx.progress("asking for approval")
    decision = await ctx.ask(APPROVAL, {"close": account_id})
    if not decision.approved:
        return {"closed": None, "reason": decision.reason}
    answer = await ctx.ask(confirm, {"question": f"close {account_id}?"})
    assert isinstance(answer, ConfirmOut)
    done = await ctx.step("close", _closed, account_id)
    return {**done, "note": answer.note, "by": decision.decided_by}


def _last(request: ModelRequest, role: str) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == role), "")


def respond(request: ModelRequest) -> str | ModelResponse:
    first = request.messages[-1].role == "user"
    if request.agent == "talker":
        return f"You said: {_last(request, 'user')}. {SENTENCE}"
    if request.agent == "slow":
        return SLOW_REPLY
    if request.agent == "asker":
        if first:
            return calls(call("confirm", {"question": _last(request, "user")}))
        return f"asker got: {_last(request, 'tool')}"
    if request.agent == "closer":
        if first:
            return calls(call("close_account", {"account_id": "acc-1"}))
        return f"closer got: {_last(request, 'tool')}"
    if request.agent == "keeper":
        if first:
            return calls(call("checked_close", {"account_id": "acc-7"}))
        return f"keeper got: {_last(request, 'tool')}"
    if request.agent == "delegator":
        if first:
            task = {"message": f"close: {_last(request, 'user')}"}
            return calls(call("subagent__deputy", task, id="to-deputy"))
        return f"delegator got: {_last(request, 'tool')}"
    if request.agent == "deputy":
        done = sum(m.role == "assistant" for m in request.messages)
        if done == 0:
            return calls(call("close_account", {"account_id": "acc-9"}, id="deputy-close"))
        if done == 1:
            return calls(call("confirm", {"question": "close acc-9?"}, id="deputy-confirm"))
        results = [m.content or "" for m in request.messages if m.role == "tool"]
        return f"deputy got: {' then '.join(results)}"
    raise AssertionError(f"no script for {request.agent}")


class Paced(ScriptedModel):
    """``slow`` is paced for a kill mid-answer; the others at ``CHAT_PACE_SEC``."""

    def __init__(self) -> None:
        super().__init__(
            respond=respond, chunk_chars=4, pace_sec=float(os.environ.get("CHAT_PACE_SEC", 0.01))
        )
        self._slow = ScriptedModel(respond=respond, chunk_chars=4, pace_sec=0.05)

    def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.agent == "slow":
            return self._slow.stream(request)
        return super().stream(request)


def runtime() -> AgentRuntime:
    deputy = Agent(
        "deputy",
        "closes accounts for the delegator",
        tools=[close_account, confirm],
        tool_timeout=timedelta(minutes=10),
    )
    agents = [
        Agent("talker", "talks"),
        Agent("slow", "talks slowly"),
        Agent("asker", "asks the user", tools=[confirm], tool_timeout=timedelta(minutes=10)),
        Agent("closer", "closes accounts", tools=[close_account]),
        Agent(
            "keeper",
            "closes accounts carefully",
            tools=[checked_close, confirm],
            tool_timeout=timedelta(minutes=10),
        ),
        Agent("delegator", "delegates to its deputy", sub_agents=[deputy]),
    ]
    return AgentRuntime(agents, Paced())
