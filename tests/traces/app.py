"""The agents of the trace tests (``tests.traces.app:runtime`` for a worker subprocess).

- ``tracer``: in its first turn calls a server tool (``lookup``), a client tool
  (``confirm``), an approval-gated tool (``wire``), a sub-agent (``helper``) and a durable
  tool (``crawl``, two inner steps); then answers.
- ``waiter``: asks ``confirm`` (a human wait), then runs ``slow_op`` (a server tool a
  crash test kills mid-call), then answers.
- ``keeper``: a persistent agent (its follow-ups arrive in its workflow's inbox).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, client_tool, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls


class ConfirmIn(BaseModel):
    question: str


class ConfirmOut(BaseModel):
    ok: bool


confirm = client_tool("confirm", input=ConfirmIn, output=ConfirmOut)


@tool(safe_to_retry=True)
async def lookup(order_id: str) -> dict[str, Any]:
    """Look an order up."""
    return {"id": order_id, "total_cents": 1200}


@tool(requires_approval=True)
async def wire(cents: int) -> str:
    """Send money (a human approves first)."""
    return f"wired {cents}"


@tool(safe_to_retry=True)
async def slow_op(label: str) -> str:
    """Work that takes a moment."""
    return f"done {label}"


def _page(n: int) -> int:
    return n * 10


@tool(durable=True)
async def crawl(ctx: ToolContext, pages: int) -> int:
    """Crawl pages, each an inner step."""
    total = 0
    for n in range(1, pages + 1):
        total += await ctx.step(f"fetch-{n}", _page, n, safe_to_retry=True)
    return total


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if request.agent == "helper":
        return "helper counted 3 boxes"
    if request.agent == "tracer" and turn == 0:
        return calls(
            call("lookup", {"order_id": "o-1"}),
            call("confirm", {"question": "go on?"}),
            call("wire", {"cents": 500}),
            call("subagent__helper", {"message": "count the boxes"}),
            call("crawl", {"pages": 2}),
        )
    if request.agent == "waiter" and turn == 0:
        return calls(call("confirm", {"question": "may I?"}))
    if request.agent == "waiter" and turn == 1:
        time.sleep(0.5)  # a slow model: the spans before it are exported before a crash after it
        return calls(call("slow_op", {"label": "after the answer"}))
    return f"{request.agent} finished after {turn} turns"


AGENTS = [
    Agent(
        "tracer",
        tools=[lookup, confirm, wire, crawl],
        sub_agents=[Agent("helper")],
        tool_timeout=timedelta(minutes=10),
    ),
    Agent("waiter", tools=[confirm, slow_op], tool_timeout=timedelta(minutes=10)),
    Agent("keeper", persistent=True, idle_ttl=timedelta(minutes=5)),
]
MODEL = ScriptedModel(respond=respond, name="scripted-model")


def runtime() -> AgentRuntime:
    return AgentRuntime(AGENTS, MODEL)
