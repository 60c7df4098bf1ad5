"""Agents for the in-process integration suite; one ScriptedModel dispatches on agent name."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from pydantic import BaseModel, field_validator

from dbos_agents import (
    Agent,
    ModelError,
    ModelResponse,
    ToolContext,
    TransientModelError,
    client_tool,
    tool,
)
from dbos_agents.models import FallbackModel, ModelRequest, ScriptedModel, call, calls

from . import durable_agents, state_agents
from .streaming_model import LONG_REPLY, StreamedScript

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


UGLY = "nul\x00 lone\ud800 end"
"""What a careless tool or model may produce: Postgres cannot store it as text."""


@tool
async def ugly_charge(ctx: ToolContext, order_id: str) -> dict[str, Any]:
    """Side-effecting; its output holds a NUL, a lone surrogate and non-finite floats."""
    with _lock:
        EFFECTS[ctx.idempotency_key] += 1
    return {"note": UGLY, UGLY: [float("nan"), float("inf")], "order": order_id}


BARRIERS: dict[str, threading.Barrier] = {}
"""One per session: the three parallel calls must all be inside their handlers at once."""


def _barrier(session_id: str) -> threading.Barrier:
    with _lock:
        return BARRIERS.setdefault(session_id, threading.Barrier(3, timeout=20))


@tool
def slow_sync(ctx: ToolContext, label: str) -> str:
    """A synchronous handler, run off the event loop; meets its siblings at a barrier."""
    _barrier(ctx.session_id).wait()
    with _lock:
        EFFECTS[f"sync:{ctx.session_id}:{label}"] += 1
    return f"ok {label}"


@tool
async def slow_async(ctx: ToolContext, label: str) -> str:
    await asyncio.to_thread(_barrier(ctx.session_id).wait)
    with _lock:
        EFFECTS[f"async:{ctx.session_id}:{label}"] += 1
    return f"ok {label}"


GATES: dict[str, asyncio.Event] = {}
"""Per session: a started ``held_charge`` waits until the test sets its gate."""


@tool
async def held_charge(ctx: ToolContext, cents: int) -> dict[str, Any]:
    """Side-effecting: records its effect, then holds until the test releases it."""
    with _lock:
        EFFECTS[f"held:{ctx.session_id}"] += 1
    await GATES.setdefault(ctx.session_id, asyncio.Event()).wait()
    return {"charged": cents}


@tool
async def explode(reason: str) -> str:
    """Always raises."""
    raise RuntimeError(f"kaboom: {reason}")


class ConfirmIn(BaseModel):
    """Ask the customer to confirm something."""

    question: str


class ConfirmOut(BaseModel):
    ok: bool
    note: str = ""


confirm = client_tool("confirm", input=ConfirmIn, output=ConfirmOut)


class BookIn(BaseModel):
    what: str


class Booking(BaseModel):
    when: datetime
    id: UUID
    seats: int

    @field_validator("seats")
    @classmethod
    def _even(cls, v: int) -> int:  # a rule the JSON schema cannot express
        if v % 2:
            raise ValueError("seats come in pairs")
        return v


book = client_tool("book", input=BookIn, output=Booking)
confirm_fast = client_tool(
    "confirm_fast", input=ConfirmIn, output=ConfirmOut, timeout=timedelta(seconds=1)
)


@tool(requires_approval=True)
async def close_account(ctx: ToolContext, account_id: str) -> dict[str, Any]:
    """Close an account (needs a human's approval)."""
    with _lock:
        EFFECTS[f"close:{ctx.session_id}:{account_id}"] += 1
    return {"closed": account_id}


def _last_tool(request: ModelRequest) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == "tool"), "")


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
    if agent == "holder":
        if turn == 0:
            return calls(call("held_charge", {"cents": 7}))
        return f"holder got: {_last_tool(request)}"
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
    if agent in ("chat", "pchat"):
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
    if agent in ("asker", "leaf"):
        if turn == 0:
            return calls(call("confirm", {"question": _last_user(request)}))
        return f"{agent} got: {_last_tool(request)}"
    if agent == "impatient":
        if turn == 0:
            return calls(call("confirm_fast", {"question": "quick?"}))
        notes = [m.content for m in request.messages if m.role == "system"]
        return f"impatient got: {_last_tool(request)} notes={len(notes)}"
    if agent == "latecomer":  # a late answer arrives while a later call of the run waits
        if turn == 0:
            return calls(call("confirm_fast", {"question": "quick?"}))
        if turn == 1:
            return calls(call("confirm", {"question": "and now?"}))
        notes = [m.content for m in request.messages if m.role == "system"]
        return f"latecomer got: {_last_tool(request)} notes={len(notes)}"
    if agent == "closer":
        if turn == 0:
            return calls(call("close_account", {"account_id": "acc-1"}))
        return f"closer got: {_last_tool(request)}"
    if agent in ("boss", "middle"):
        child = "subagent__middle" if agent == "boss" else "subagent__leaf"
        if turn == 0:
            return calls(call(child, {"message": f"from {agent}: {_last_user(request)}"}))
        return f"{agent} got: {_last_tool(request)}"
    if agent == "booker":
        if turn == 0:
            return calls(call("book", {"what": _last_user(request)}))
        return f"booker got: {_last_tool(request)}"
    if agent == "ugly":
        if turn == 0:
            return calls(call("ugly_charge", {"order_id": UGLY}))
        return f"ugly saw {_last_tool(request)} and says {UGLY}"
    if agent in ("streamer", "slow_streamer", "stream_cut", "stream_fail"):
        return LONG_REPLY
    if agent in ("stream_cut_tool", "slow_tool_streamer"):
        if turn == 0:
            return calls(
                call("get_order", {"order_id": "stream-" + _last_user(request)}),
                text="Let me look that order up for you. ",
            )
        return f"found: {_last_tool(request)}" if agent == "stream_cut_tool" else LONG_REPLY
    if agent in state_agents.NAMES:
        return state_agents.respond(request)
    if agent in durable_agents.NAMES:
        return durable_agents.respond(request)
    raise AssertionError(f"no script for {agent}")


MODEL = StreamedScript(ScriptedModel(respond=respond, usd_per_1k_tokens=1.0))


def _plan(request: ModelRequest) -> str | ModelResponse:
    """The planner delegates once, then reports; its helper answers at once."""
    if request.agent == "helper":
        return f"helper did: {_last_user(request)}"
    if _turn(request) == 0:
        return calls(call("subagent__helper", {"message": "count the boxes"}))
    return f"planner says: {_last_tool(request)}"


class WholeReplies:
    """A model with no ``stream``: its replies are recorded whole, never streamed."""

    def __init__(self, inner: ScriptedModel) -> None:
        self.inner = inner

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def provider(self) -> str:
        return self.inner.provider

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return await self.inner.complete(request)


class Failing:
    """A provider that always fails: overloaded (``TransientModelError``), or refusing the
    request (``ModelError``); counts its calls."""

    def __init__(self, name: str, error: type[ModelError]) -> None:
        self.name, self.error, self.calls = name, error, 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        raise self.error(f"{self.name}: 529 overloaded" if self.error is TransientModelError
                         else f"{self.name}: 400 context too long")  # fmt: skip


OVERLOADED = Failing("primary-overloaded", TransientModelError)
REFUSING = Failing("primary-refusing", ModelError)
BACKUP = ScriptedModel(respond=lambda r: f"backup answered: {_last_user(r)}", name="backup")


PLANNER_MODEL = WholeReplies(ScriptedModel(respond=_plan, name="planner-model"))
"""Not streaming: the planner's replies are written whole, the helper's streamed."""
HELPER_MODEL = StreamedScript(ScriptedModel(respond=_plan, name="helper-model"))

AGENTS = [
    Agent("support", "Help with orders.", tools=[get_order, refund]),
    Agent("parallel", tools=[slow_sync, slow_async, get_order]),
    Agent("faulty", tools=[explode, refund]),
    Agent("holder", tools=[held_charge]),
    Agent("looper", tools=[get_order], max_turns=3),
    Agent("spender", tools=[get_order], budget_tokens=150),
    Agent("chat"),
    Agent("flaky"),
    Agent("dupes", tools=[get_order]),
    Agent("asker", tools=[confirm], tool_timeout=timedelta(minutes=10)),
    Agent("impatient", tools=[confirm_fast]),
    Agent("latecomer", tools=[confirm_fast, confirm], tool_timeout=timedelta(minutes=10)),
    Agent("closer", tools=[close_account]),
    Agent("pchat", persistent=True, idle_ttl=timedelta(seconds=3)),
    Agent("ugly", tools=[ugly_charge]),
    Agent("booker", tools=[book]),
    Agent("streamer"),
    Agent("slow_streamer"),
    Agent("endless_streamer"),
    Agent("stream_cut"),
    Agent("stream_cut_tool", tools=[get_order]),
    Agent("stream_fail"),
    Agent("slow_tool_streamer", tools=[get_order]),
    Agent(
        "boss",
        sub_agents=[Agent("middle", sub_agents=[Agent("leaf", tools=[confirm])])],
    ),
    Agent(
        "planner",
        model=PLANNER_MODEL,
        sub_agents=[Agent("helper", model=HELPER_MODEL)],
    ),
    Agent("resilient", model=FallbackModel(OVERLOADED, BACKUP)),
    Agent("strict", model=FallbackModel(REFUSING, BACKUP)),
    *state_agents.AGENTS,
    *durable_agents.AGENTS,
]
