"""The worker of bench/recovery.py (``recovery.py --worker``): the real worker loop running
the agent ``recovery``, whose side-effecting tools each record one effect row the way an
external provider would (autocommit, a connection of its own)."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import psycopg
from _lib.internals import serve_forever

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

AGENT = "recovery"
TOOLS = ("charge", "send_email", "ship")
EFFECTS = "bench_recovery_effects"
EFFECT_POOL_SIZE = 4

_POOL: list[asyncio.Queue[psycopg.AsyncConnection[Any]]] = []  # one per worker event loop
_OPENED: list[int] = []  # effect connections opened so far (at most EFFECT_POOL_SIZE)


async def _effect_connection() -> psycopg.AsyncConnection[Any]:
    """A connection from the effect pool; opening one retries (as a provider client would)
    while the server refuses connections, so a busy server never loses or hangs an effect."""
    if not _POOL:
        _POOL.append(asyncio.Queue())
    pool = _POOL[0]
    while True:
        if pool.empty() and len(_OPENED) < EFFECT_POOL_SIZE:
            _OPENED.append(1)
            try:
                url = os.environ["DBOS_AGENTS_DATABASE_URL"]
                return await psycopg.AsyncConnection.connect(url, autocommit=True)
            except psycopg.OperationalError:
                _OPENED.pop()
                await asyncio.sleep(0.5)
                continue
        try:
            return await asyncio.wait_for(pool.get(), timeout=0.5)
        except TimeoutError:
            continue


async def record_effect(ctx: ToolContext) -> None:
    """The 'provider': one autocommit INSERT on a pooled connection of its own."""
    conn = await _effect_connection()
    try:
        await conn.execute(
            f"INSERT INTO {EFFECTS} (idempotency_key, session_id, tool_call_id, tool, pid)"
            " VALUES (%s, %s, %s, %s, %s)",
            (ctx.idempotency_key, ctx.session_id, ctx.tool_call_id, ctx.tool_name, os.getpid()),
        )
    finally:
        _POOL[0].put_nowait(conn)


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Charge the customer (side-effecting: at most once)."""
    await record_effect(ctx)
    return {"charged": cents, "order_id": order_id}


@tool
async def send_email(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Email the receipt (side-effecting: at most once)."""
    await record_effect(ctx)
    return {"sent": True, "order_id": order_id}


@tool
async def ship(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Ship the order (side-effecting: at most once)."""
    await record_effect(ctx)
    return {"shipped": True, "order_id": order_id}


def respond(request: ModelRequest) -> str | ModelResponse:
    """Turn k < TURNS calls TOOLS[k % 3]; then the final answer."""
    turn = sum(1 for m in request.messages if m.role == "assistant")
    turns = int(os.environ.get("BENCH_RECOVERY_TURNS", "3"))
    if turn < turns:
        name = TOOLS[turn % len(TOOLS)]
        return calls(call(name, {"order_id": f"o{turn}", "cents": 100 + turn}))
    return "done"


def worker_main() -> None:
    """``--worker``: run the bench agent in ``serve_forever`` (the real worker loop)."""
    agent = Agent(AGENT, "charges, emails, ships", tools=[charge, send_email, ship])
    rt = AgentRuntime([agent], ScriptedModel(respond=respond))
    print(f"imported {time.time():.6f}", flush=True)
    asyncio.run(_serve(rt))


async def _serve(rt: AgentRuntime) -> None:
    """Open the effect 'provider' connections first (an external provider has capacity of
    its own; taken mid-run from a full server they could wait on connections held by the
    very tool attempts waiting for them), then the real worker loop."""
    conns = [await _effect_connection() for _ in range(EFFECT_POOL_SIZE)]
    for c in conns:
        _POOL[0].put_nowait(c)
    await serve_forever(rt)  # prints "dbos-agents worker ready ..." after launch
