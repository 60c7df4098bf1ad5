"""Agents with typed session state, for tests/integration/test_state.py (registered with
the in-process runtime through ``agents.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

from pydantic import BaseModel, Field

from dbos_agents import Agent, ModelResponse, ToolContext, tool
from dbos_agents.models import ModelRequest, call, calls


class Cart(BaseModel):
    items: list[str] = []
    total_cents: int = Field(default=0, ge=0)


class Tally(BaseModel):
    points: list[int] = []


@tool
async def add_item(ctx: ToolContext, name: str, cents: int) -> str:
    """Add an item to the cart (an update function: side-by-side calls both land)."""
    seen = len(ctx.state.items)
    await asyncio.sleep(0.3)  # side-by-side calls all read the state before any commits

    def add(cart: Cart) -> Cart:
        return cart.model_copy(
            update={"items": [*cart.items, name], "total_cents": cart.total_cents + cents}
        )

    await ctx.update_state(add)
    return f"added {name} (saw {seen})"


@tool(safe_to_retry=True)
async def show_cart(ctx: ToolContext) -> dict[str, Any]:
    """Read the cart."""
    state: Cart = ctx.state
    return state.model_dump()


@tool
async def set_total(ctx: ToolContext, cents: int) -> str:
    """Replace the cart's total (a full replacement, validated)."""
    ctx.state = Cart(items=ctx.state.items, total_cents=0).model_copy(
        update={"total_cents": cents}  # model_copy does not validate: the runtime does
    )
    return f"total set to {cents}"


@tool
async def sneaky_total(ctx: ToolContext, cents: int) -> str:
    """Passes in the handler, fails against the latest state at the commit."""
    await asyncio.sleep(0.3)  # both calls read the state before either commits

    def apply(cart: Cart) -> Cart:
        return cart.model_copy(update={"total_cents": cart.total_cents + cents})

    await ctx.update_state(apply)
    return f"total moved by {cents}"


@tool
async def add_point(ctx: ToolContext, n: int) -> list[int]:
    """Add a point to the tally."""
    new = await ctx.update_state(lambda t: Tally(points=[*t.points, n]))
    points: list[int] = new.points
    return points


def upgrade_tally(old: dict[str, Any]) -> dict[str, Any]:
    """Version 1 stored the points as one comma-separated string."""
    points = old.get("points")
    if isinstance(points, str):
        return {**old, "points": [int(p) for p in points.split(",") if p]}
    return old


def cart_instructions(cart: Cart) -> str:
    return f"The cart holds {len(cart.items)} items worth {cart.total_cents} cents."


def _turn(request: ModelRequest) -> int:
    return sum(1 for m in request.messages if m.role == "assistant")


def _last_user(request: ModelRequest) -> str:
    return next(m.content or "" for m in reversed(request.messages) if m.role == "user")


def _last_tool(request: ModelRequest) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == "tool"), "")


INSTRUCTIONS: dict[str, list[str]] = {}
"""Per session's first user message: the instructions each model turn was given."""


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = _turn(request)
    first = next(m.content or "" for m in request.messages if m.role == "user")
    INSTRUCTIONS.setdefault(first, []).append(request.instructions)
    user = _last_user(request)
    if request.agent == "cart":
        if user.startswith("total "):  # "total <cents>": one replacement, then answer
            if turn % 2 == 0:
                return calls(call("set_total", {"cents": int(user.split()[1])}))
            return f"set: {_last_tool(request)}"
        if user.startswith("sneaky "):  # two update functions: the second goes below 0
            if turn % 2 == 0:
                cents = int(user.split()[1])
                return calls(
                    call("sneaky_total", {"cents": cents}),
                    call("sneaky_total", {"cents": cents}),
                )
            return "sneaky done"
        if turn == 0:
            return calls(call("add_item", {"name": "apple", "cents": 100}))
        if turn == 1:
            return calls(
                call("add_item", {"name": "pear", "cents": 200}),
                call("add_item", {"name": "fig", "cents": 300}),
                call("add_item", {"name": "kiwi", "cents": 400}),
            )
        if turn == 2:
            return calls(call("show_cart", {}))
        return f"cart: {_last_tool(request)}"
    if request.agent in ("tally", "tally_m"):
        if turn % 2 == 0:
            return calls(call("add_point", {"n": int(user)}))
        return f"tally: {_last_tool(request)}"
    raise AssertionError(f"no script for {request.agent}")


NAMES = ("cart", "tally", "tally_m")
AGENTS = [
    Agent(
        "cart",
        instructions=cart_instructions,
        tools=[add_item, show_cart, set_total, sneaky_total],
        state=Cart,
    ),
    Agent("tally", "Keep the tally.", tools=[add_point], state=Tally),
    Agent(
        "tally_m", "Keep the tally.", tools=[add_point], state=Tally, migrate_state=upgrade_tally
    ),
]
