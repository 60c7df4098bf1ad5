"""The app of tests/crash/test_durable_crash.py: a durable tool with ten inner steps (odd
ones side-effecting, even ones safe to retry), each effect recorded in the witness file
outside the worker. The tool settles an unknown outcome itself: it looks the effect up
(a safe step) and makes it again under a new step only if it did not happen."""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from dbos_agents import (
    APPROVAL,
    Agent,
    AgentRuntime,
    ModelResponse,
    StepOutcomeUnknownError,
    ToolContext,
    client_tool,
    tool,
)
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import Witness

STEPS = 10
PAUSE_SEC = float(os.environ.get("DURABLE_APP_PAUSE_SEC", "0"))
"""How long each inner step takes (a SIGTERM then lands inside one)."""


async def charge(session: str, i: int) -> dict[str, Any]:
    Witness().record("effect", step=i, session=session, pid=os.getpid())
    await asyncio.sleep(PAUSE_SEC)
    return {"charged": i}


def lookup(session: str, i: int) -> bool:
    return Witness().count("effect", step=i, session=session) > 0


async def read(session: str, i: int) -> int:
    Witness().record("read", step=i, session=session, pid=os.getpid())
    await asyncio.sleep(PAUSE_SEC)
    return i * i


async def _charge_once(ctx: ToolContext, i: int, settled: list[int]) -> None:
    """Charge ``i`` exactly once: an attempt whose outcome is unknown is looked up, and
    tried again (a new step) only if it did not happen."""
    for attempt in range(1, 100):
        try:
            await ctx.step(f"charge-{i}.{attempt}", charge, ctx.session_id, i)
            return
        except StepOutcomeUnknownError:
            settled.append(i)
            if await ctx.step(
                f"lookup-{i}.{attempt}", lookup, ctx.session_id, i, safe_to_retry=True
            ):
                return


@tool(durable=True)
async def ten_steps(ctx: ToolContext) -> dict[str, Any]:
    """Ten inner steps; settles the unknown outcome of a side-effecting one."""
    settled: list[int] = []
    total = 0
    for i in range(1, STEPS + 1):
        if i % 2:
            await _charge_once(ctx, i, settled)
        else:
            total += await ctx.step(f"read-{i}", read, ctx.session_id, i, safe_to_retry=True)
        ctx.checkpoint({"step": i})
        ctx.progress(f"step {i} of {STEPS}", i / STEPS)
    return {"steps": STEPS, "total": total, "settled": settled, "snapshot": ctx.snapshot}


@tool(durable=True)
async def resumable(ctx: ToolContext) -> dict[str, Any]:
    """Three steps, a checkpoint after each; a recovery with two done finishes from the
    snapshot instead (``on_recovered``)."""
    for i in (1, 2, 3):
        await ctx.step(f"part-{i}", charge, ctx.session_id, i, safe_to_retry=True)
        ctx.checkpoint({"done": i})
    return {"finished": "by the body", "recovered": ctx.recovered}


@resumable.on_recovered
async def _resume(ctx: ToolContext) -> dict[str, Any] | None:
    Witness().record("recovered", session=ctx.session_id, snapshot=ctx.snapshot)
    snapshot = ctx.snapshot
    if isinstance(snapshot, dict) and snapshot.get("done", 0) >= 2:
        return {"finished": "from the snapshot", "snapshot": snapshot}
    return None  # too early: run the body again


class AskIn(BaseModel):
    question: str


class AskOut(BaseModel):
    ok: bool


confirm = client_tool("confirm", input=AskIn, output=AskOut)


@tool(durable=True)
async def approved_charge(ctx: ToolContext, cents: int) -> str:
    """Asks for an approval mid-tool, then charges."""
    await ctx.step("prepare", charge, ctx.session_id, 0)
    decision = await ctx.ask(APPROVAL, {"cents": cents})
    if not decision.approved:
        return "denied"
    answer = await ctx.ask(confirm, {"question": f"charge {cents}?"})
    if not answer.ok:
        return "not confirmed"
    await ctx.step("charge", charge, ctx.session_id, cents)
    return f"charged {cents}"


def _respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        if request.agent == "asker":
            return calls(call("approved_charge", {"cents": 300}))
        if request.agent == "resumer":
            return calls(call("resumable", {}))
        return calls(call("ten_steps", {}))
    tool_msg = next(m for m in reversed(request.messages) if m.role == "tool")
    return "tool said: " + (tool_msg.content or "")


def _on_call(request: ModelRequest) -> None:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    Witness().record("model", turn=turn, agent=request.agent, pid=os.getpid())


def runtime() -> AgentRuntime:
    model = ScriptedModel(respond=_respond, on_call=_on_call)
    agents = [
        Agent("stepper", tools=[ten_steps]),
        Agent("resumer", tools=[resumable]),
        Agent("asker", tools=[approved_charge, confirm], tool_timeout=timedelta(minutes=10)),
    ]
    return AgentRuntime(agents, model)
