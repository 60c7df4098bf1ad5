"""The app the soak runs in two worker subprocesses (``--app tests.soak.app:runtime``).

Mixed agents: safe reads, side-effecting tools with and without a ``verify`` hook, client
tools, approvals, a sub-agent, a persistent session. Every side-effecting handler records
its effect in the witness file (outside the worker) under ``ctx.idempotency_key``; the
verify hook reads the same file, as it would ask a payment provider. Handlers sleep a
little at random so that kills land inside them, between the effect and the checkpoint.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, client_tool, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import Witness

SIDE_EFFECTING = ("charge", "refund", "close_account")
"""Tools whose effects must happen at most once per call (the witness counts them)."""
WAIT_TIMEOUT = timedelta(seconds=float(os.environ.get("SOAK_WAIT_TIMEOUT_SEC", "10")))
IDLE_TTL = timedelta(seconds=float(os.environ.get("SOAK_IDLE_TTL_SEC", "5")))
INJECT = os.environ.get("SOAK_INJECT", "")
"""``double_effect`` plants a bug (5 % of effects happen twice) to prove the checks bite."""


def read_events(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The witness lines, skipping a torn last line (a reader may race an appender)."""
    p = Path(path)
    if not p.exists():
        return []
    out = []
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _witness() -> Witness:
    return Witness()


async def _jitter(hi: float = 0.12) -> None:
    await asyncio.sleep(random.uniform(0.0, hi))


def _record(kind: str, ctx: ToolContext, tool_name: str, **extra: Any) -> None:
    _witness().record(
        kind,
        tool=tool_name,
        key=ctx.idempotency_key,
        session=ctx.session_id,
        root=ctx.root_session_id,
        call=ctx.tool_call_id,
        attempt=ctx.attempt,
        pid=os.getpid(),
        executor=os.environ.get("DBOS_AGENTS_EXECUTOR_ID"),
        t=round(time.time(), 3),
        **extra,
    )


async def _effect(ctx: ToolContext, tool_name: str) -> None:
    _record("begin", ctx, tool_name)
    await _jitter()
    _record("effect", ctx, tool_name)  # the side effect: one O_APPEND write, survives a kill
    if INJECT == "double_effect" and random.random() < 0.05:
        _record("effect", ctx, tool_name)  # a planted bug: the checker must catch it
    await _jitter()


@tool(safe_to_retry=True)
async def lookup(ctx: ToolContext, item: str) -> dict[str, object]:
    """A pure read: may run again on recovery."""
    _record("read", ctx, "lookup")
    await _jitter(0.05)
    return {"item": item, "found": True}


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Side-effecting, no verify hook: a durability error when the outcome is unknown."""
    await _effect(ctx, "charge")
    return {"charged": cents, "order_id": order_id}


@tool
async def refund(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Side-effecting with a verify hook that asks the 'provider' (the witness)."""
    await _effect(ctx, "refund")
    return {"refunded": cents, "order_id": order_id}


@refund.verify
async def _refund_happened(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object] | None:
    path = os.environ["DBOS_AGENTS_WITNESS"]
    happened = any(
        e.get("kind") == "effect" and e.get("key") == ctx.idempotency_key for e in read_events(path)
    )
    _record("verify", ctx, "refund", happened=happened)
    return {"refunded": cents, "order_id": order_id} if happened else None


@tool(requires_approval=True, approval_timeout=WAIT_TIMEOUT)
async def close_account(ctx: ToolContext, account_id: str) -> dict[str, object]:
    """Approval-gated and side-effecting."""
    await _effect(ctx, "close_account")
    return {"closed": account_id}


class AskIn(BaseModel):
    question: str


class AskOut(BaseModel):
    answer: str


ask = client_tool("ask", input=AskIn, output=AskOut, timeout=WAIT_TIMEOUT)


def _turn_in_run(request: ModelRequest) -> int:
    """Assistant messages since the last user message: the turn within this run."""
    n = 0
    for m in reversed(request.messages):
        if m.role == "user":
            break
        if m.role == "assistant":
            n += 1
    return n


def _last_user(request: ModelRequest) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == "user"), "")


def _respond(request: ModelRequest) -> str | ModelResponse:
    turn = _turn_in_run(request)
    msg = _last_user(request)
    agent = request.agent
    if agent == "safe":
        if turn == 0:
            return calls(call("lookup", {"item": msg}), call("lookup", {"item": msg + "-2"}))
    elif agent == "effect":
        if turn == 0:
            return calls(
                call("charge", {"order_id": msg, "cents": 1}), call("lookup", {"item": msg})
            )
        if turn == 1:
            return calls(call("charge", {"order_id": msg + "-b", "cents": 2}))
    elif agent == "verified":
        if turn == 0:
            return calls(call("refund", {"order_id": msg, "cents": 3}))
    elif agent == "client":
        if turn == 0:
            return calls(
                call("ask", {"question": msg}), call("charge", {"order_id": msg, "cents": 4})
            )
    elif agent == "approval":
        if turn == 0:
            return calls(call("close_account", {"account_id": msg}))
    elif agent == "parent":
        if turn == 0:
            return calls(call("subagent__child", {"message": msg}), call("lookup", {"item": msg}))
    elif agent == "child":
        if turn == 0:
            return calls(
                call("ask", {"question": msg}), call("refund", {"order_id": msg, "cents": 5})
            )
    elif agent == "pchat":
        if turn == 0:
            return calls(call("charge", {"order_id": msg, "cents": 6}))
    elif agent == "mixed" and turn == 0:
        return calls(
            call("charge", {"order_id": msg, "cents": 7}),
            call("refund", {"order_id": msg, "cents": 8}),
            call("ask", {"question": msg}),
            call("close_account", {"account_id": msg}),
            call("lookup", {"item": msg}),
        )
    return f"{agent} done: {msg}"


class JitteryModel:
    """The scripted model with a little latency, so kills also land in model steps."""

    def __init__(self) -> None:
        self._inner = ScriptedModel(respond=_respond)

    @property
    def name(self) -> str:
        return self._inner.name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await _jitter(0.05)
        return await self._inner.complete(request)


AGENT_NAMES = ("safe", "effect", "verified", "client", "approval", "parent", "pchat", "mixed")


def runtime() -> AgentRuntime:
    child = Agent("child", "sub-agent: asks, then refunds", tools=[ask, refund])
    agents = [
        Agent("safe", "reads", tools=[lookup]),
        Agent("effect", "charges twice", tools=[charge, lookup]),
        Agent("verified", "refunds", tools=[refund]),
        Agent("client", "asks and charges", tools=[ask, charge]),
        Agent("approval", "closes an account after approval", tools=[close_account]),
        Agent("parent", "delegates", tools=[lookup], sub_agents=[child]),
        Agent("pchat", "persistent chat", tools=[charge], persistent=True, idle_ttl=IDLE_TTL),
        Agent("mixed", "everything at once", tools=[charge, refund, ask, close_account, lookup]),
        child,
    ]
    return AgentRuntime(agents, JitteryModel())
