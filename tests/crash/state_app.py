"""The app of tests/crash/test_state_crash.py: tools that change the session's typed state,
each effect recorded in the witness file outside the worker, and the model's instructions
(a function of the state) recorded with every model call."""

from __future__ import annotations

import os
from collections.abc import Callable

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import Witness


class Stock(BaseModel):
    count: int = 0
    notes: list[str] = []


def _bump(ctx: ToolContext, tool_name: str) -> None:
    Witness().record("effect", tool=tool_name, key=ctx.idempotency_key, session=ctx.session_id)


def _add(note: str) -> Callable[[Stock], Stock]:
    def add(s: Stock) -> Stock:
        return Stock(count=s.count + 1, notes=[*s.notes, note])

    return add


@tool
async def stock(ctx: ToolContext) -> str:
    """Side-effecting, no verify: at most once, durability error when unknown."""
    _bump(ctx, "stock")
    await ctx.update_state(_add("stock"))
    return "stocked"


@tool(safe_to_retry=True)
async def peek(ctx: ToolContext) -> str:
    """Safe to retry: run again on recovery; its state change must still land once."""
    _bump(ctx, "peek")
    await ctx.update_state(_add("peek"))
    return "peeked"


@tool
async def restock(ctx: ToolContext) -> str:
    """Side-effecting with verify; the verify hook re-applies the state change."""
    _bump(ctx, "restock")
    await ctx.update_state(_add("restock"))
    return "restocked"


@restock.verify
async def _restocked(ctx: ToolContext) -> str | None:
    if Witness().count("effect", tool="restock", key=ctx.idempotency_key) == 0:
        return None
    await ctx.update_state(_add("restock"))  # the lost attempt's change, settled here
    return "restocked"


def _instructions(s: Stock) -> str:
    return f"count={s.count}"


def _respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        return calls(call(request.messages[0].content or "stock", {}))
    return "done"


def _on_call(request: ModelRequest) -> None:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    Witness().record(
        "model",
        turn=turn,
        first=request.messages[0].content,
        instructions=request.instructions,
        pid=os.getpid(),
    )


def runtime() -> AgentRuntime:
    model = ScriptedModel(respond=_respond, on_call=_on_call)
    agent = Agent("stateful", instructions=_instructions, tools=[stock, peek, restock], state=Stock)
    return AgentRuntime([agent], model)
