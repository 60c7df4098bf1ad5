"""A support-desk agent: a read tool, and a refund tool that forwards its idempotency key.

Run it with ``dbos-agents demo`` (embedded Postgres, ScriptedModel), or as a worker:
``dbos-agents worker --app dbos_agents.examples.support_desk:runtime``.
"""

from __future__ import annotations

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ToolContext, tool
from dbos_agents.models import ScriptedModel, call, calls

REFUNDS: dict[str, int] = {}
"""Stands in for a payment provider that deduplicates on the idempotency key."""


class Order(BaseModel):
    id: str
    item: str
    total_cents: int


class Refund(BaseModel):
    order_id: str
    cents: int
    provider_key: str


@tool(safe_to_retry=True)
async def get_order(order_id: str) -> Order:
    """Look up an order by id (a pure read: safe to re-run after a crash)."""
    return Order(id=order_id, item="espresso machine", total_cents=24900)


@tool
async def issue_refund(ctx: ToolContext, order_id: str, cents: int) -> Refund:
    """Refund part of an order. Side-effecting: runs at most once per tool call."""
    REFUNDS.setdefault(ctx.idempotency_key, cents)  # the provider dedupes on this key
    return Refund(order_id=order_id, cents=cents, provider_key=ctx.idempotency_key)


@issue_refund.verify
async def _refund_exists(ctx: ToolContext, order_id: str, cents: int) -> Refund | None:
    """After a crash mid-refund: ask the provider whether the refund went through."""
    if ctx.idempotency_key in REFUNDS:
        return Refund(order_id=order_id, cents=cents, provider_key=ctx.idempotency_key)
    return None


support = Agent(
    "support",
    "You are a support agent. Look orders up before refunding them.",
    tools=[get_order, issue_refund],
    max_turns=8,
    budget_usd=1.0,
)

script = ScriptedModel(
    [
        calls(call("get_order", {"order_id": "A-42"}), text="Let me look that order up."),
        calls(call("issue_refund", {"order_id": "A-42", "cents": 24900})),
        "I refunded $249.00 for order A-42. Anything else?",
        "You're welcome!",
    ]
)


def runtime() -> AgentRuntime:
    return AgentRuntime([support], script)
