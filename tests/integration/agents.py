"""Agents for the in-process integration suite; one ScriptedModel dispatches on agent name."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from typing import Any

from pydantic import BaseModel

from dbos_agents import Agent, ModelResponse, ToolContext, TransientModelError, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

EFFECTS: Counter[str] = Counter()
CONTEXTS: list[ToolContext] = []
FLAKY_FAILURES: Counter[str] = Counter()
_lock = threading.Lock()


class Order(BaseModel):
    id: str
    total_cents: int


@tool(safe_to_retry=True)
async def get_order(order_id: str) -> Order:
    """Look up an order."""
    return Order(id=order_id, total_cents=4200)


@tool
async def refund(ctx: ToolContext, order_id: str, cents: int) -> dict[str, Any]:
    """Refund part of an order (side-effecting)."""
    with _lock:
        EFFECTS[ctx.idempotency_key] += 1
        CONTEXTS.append(ctx)
    return {"refunded": cents, "key": ctx.idempotency_key}


@tool
def slow_sync(ctx: ToolContext, label: str) -> str:
    """A synchronous handler, run off the event loop."""
    import time

    time.sleep(0.2)
    with _lock:
        EFFECTS[f"sync:{ctx.session_id}:{label}"] += 1
    return f"ok {label}"


@tool
async def slow_async(ctx: ToolContext, label: str) -> str:
    await asyncio.sleep(0.2)
    with _lock:
        EFFECTS[f"async:{ctx.session_id}:{label}"] += 1
    return f"ok {label}"


@tool
async def explode(reason: str) -> str:
    """Always raises."""
    raise RuntimeError(f"kaboom: {reason}")


def _turn(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def _last_user(request: ModelRequest) -> str:
    return next(m.content or "" for m in reversed(request.messages) if m.role == "user")


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = _turn(request)
    agent = request.agent
    if agent == "support":
        if turn == 0:
            return calls(call("get_order", {"order_id": "42"}))
        if turn == 1:
            return calls(call("refund", {"order_id": "42", "cents": 500}))
        return f"refunded; said: {_last_user(request)}"
    if agent == "parallel":
        if turn == 0:
            return calls(
                call("slow_sync", {"label": "a"}),
                call("slow_async", {"label": "b"}),
                call("slow_sync", {"label": "c"}),
                call("get_order", {"order_id": "7"}),
            )
        return "all done"
    if agent == "faulty":
        if turn == 0:
            return calls(
                call("explode", {"reason": "x"}),
                call("refund", '{"order_id": 42, "cents": "lots"}'),
                call("refund", "not json"),
                call("no_such_tool", {}),
                call("refund", {"order_id": "1", "cents": 1, "extra": True}),
            )
        return "recovered from errors"
    if agent in ("looper", "spender"):
        return calls(call("get_order", {"order_id": str(turn)}))
    if agent == "chat":
        return f"echo {turn}: {_last_user(request)}"
    if agent == "flaky":
        key = _last_user(request)
        with _lock:
            FLAKY_FAILURES[key] += 1
            n = FLAKY_FAILURES[key]
        if key.startswith("transient") and n <= 2:
            raise TransientModelError("429 rate limited")
        if key.startswith("always"):
            raise TransientModelError("503 unavailable")
        return "answered after retries"
    if agent == "dupes":
        if turn == 0:
            return calls(
                call("get_order", {"order_id": "1"}, id="same"),
                call("get_order", {"order_id": "2"}, id="same"),
            )
        if turn == 1:
            return calls(call("get_order", {"order_id": "3"}, id="same"))
        return "ok"
    raise AssertionError(f"no script for {agent}")


MODEL = ScriptedModel(respond=respond, usd_per_1k_tokens=1.0)

AGENTS = [
    Agent("support", "Help with orders.", tools=[get_order, refund]),
    Agent("parallel", tools=[slow_sync, slow_async, get_order]),
    Agent("faulty", tools=[explode, refund]),
    Agent("looper", tools=[get_order], max_turns=3),
    Agent("spender", tools=[get_order], budget_tokens=150),
    Agent("chat"),
    Agent("flaky"),
    Agent("dupes", tools=[get_order]),
]
