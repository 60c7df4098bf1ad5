"""The app the crash tests run in worker subprocesses.

Every tool and every model call records itself in the witness file, outside the worker, so
the test can count effects and model calls across SIGKILLs.
"""

from __future__ import annotations

import os
from datetime import timedelta

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, client_tool, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import Witness


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Side-effecting, no verify hook: at most once, durability error when unknown."""
    Witness().record("effect", tool="charge", key=ctx.idempotency_key, session=ctx.session_id)
    return {"charged": cents, "order_id": order_id}


@tool(safe_to_retry=True)
async def lookup(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """A pure read: may run again on recovery."""
    Witness().record("effect", tool="lookup", key=ctx.idempotency_key, session=ctx.session_id)
    return {"order_id": order_id, "total": cents}


@tool
async def refund(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Side-effecting, with a verify hook that reads the witness (the 'provider')."""
    Witness().record("effect", tool="refund", key=ctx.idempotency_key, session=ctx.session_id)
    return {"refunded": cents, "order_id": order_id}


@refund.verify
async def _refund_happened(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object] | None:
    happened = Witness().count("effect", tool="refund", key=ctx.idempotency_key) > 0
    Witness().record("verify", tool="refund", key=ctx.idempotency_key, happened=happened)
    return {"refunded": cents, "order_id": order_id} if happened else None


@tool
async def slow_refund(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Side-effecting and slow, with verify: the effect lands 3 s after the handler starts."""
    import asyncio

    Witness().record("started", tool="slow_refund", key=ctx.idempotency_key)
    await asyncio.sleep(3)
    Witness().record("effect", tool="slow_refund", key=ctx.idempotency_key)
    return {"refunded": cents, "order_id": order_id}


@slow_refund.verify
async def _slow_refund_happened(
    ctx: ToolContext, order_id: str, cents: int
) -> dict[str, object] | None:
    happened = Witness().count("effect", tool="slow_refund", key=ctx.idempotency_key) > 0
    Witness().record("verify", tool="slow_refund", key=ctx.idempotency_key, happened=happened)
    return {"refunded": cents, "order_id": order_id} if happened else None


class AskIn(BaseModel):
    question: str


class AskOut(BaseModel):
    answer: str


ask = client_tool("ask", input=AskIn, output=AskOut, timeout=timedelta(seconds=6))
ask_long = client_tool("ask_long", input=AskIn, output=AskOut)  # the agent's timeout applies


def _respond(request: ModelRequest) -> str | ModelResponse:
    """Turn 1 calls the tool named by the user message; turn 2 answers."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if request.agent == "fleet":
        if turn == 0:
            return calls(call("ask_long", {"question": request.messages[0].content or ""}))
        if turn == 1:
            return calls(call("charge", {"order_id": request.messages[0].content, "cents": 1}))
        return "fleet done"
    if request.agent == "waiter":
        if turn == 0:
            return calls(call("ask", {"question": request.messages[0].content or ""}))
        last = next(m.content for m in reversed(request.messages) if m.role == "tool")
        return f"waiter got: {last}"
    if turn == 0:
        tool_name = request.messages[0].content or "charge"
        return calls(call(tool_name, {"order_id": "o-1", "cents": 500}))
    return "done"


def _on_call(request: ModelRequest) -> None:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    Witness().record("model", turn=turn, first=request.messages[0].content, pid=os.getpid())


def runtime() -> AgentRuntime:
    model = ScriptedModel(respond=_respond, on_call=_on_call)
    agent = Agent("crashy", "test agent", tools=[charge, lookup, refund, slow_refund])
    waiter = Agent("waiter", "asks the user", tools=[ask])
    fleet = Agent(
        "fleet", "asks, then charges", tools=[ask_long, charge], tool_timeout=timedelta(minutes=5)
    )
    return AgentRuntime([agent, waiter, fleet], model)
