"""A support-desk agent: a read tool, a client tool answered by a human, and a refund tool
that forwards its idempotency key to the payment provider and has a ``verify`` hook.

Run it with ``dbos-agents demo`` (embedded Postgres, ScriptedModel, a crash and a resume),
or as a worker: ``dbos-agents worker --app dbos_agents.examples.support_desk:runtime``.
With ``OPENAI_API_KEY`` or ``OPENAI_BASE_URL`` set, the runtime uses ``OpenAIModel``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ToolContext, client_tool, tool
from dbos_agents.models import Model, ScriptedModel, call, calls

PAYMENTS_ENV = "DBOS_AGENTS_DEMO_PAYMENTS"


class FakePayments:
    """Stands in for a payment provider: a file outside the worker, deduplicating on the
    idempotency key, as real providers do."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path or os.environ.get(PAYMENTS_ENV, ".dbos_agents/payments.jsonl"))

    def refunds(self) -> list[dict[str, object]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def find(self, key: str) -> dict[str, object] | None:
        return next((r for r in self.refunds() if r["key"] == key), None)

    def refund(self, order_id: str, cents: int, key: str) -> dict[str, object]:
        existing = self.find(key)
        if existing is not None:
            return existing
        row: dict[str, object] = {"order_id": order_id, "cents": cents, "key": key}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")
        return row


class Order(BaseModel):
    id: str
    item: str
    total_cents: int


class Refund(BaseModel):
    order_id: str
    cents: int
    provider_key: str


class ConfirmIn(BaseModel):
    """Ask the customer to confirm an action before it is taken."""

    question: str


class ConfirmOut(BaseModel):
    confirmed: bool
    note: str = ""


@tool(safe_to_retry=True)
async def get_order(order_id: str) -> Order:
    """Look up an order by id (a pure read: safe to re-run after a crash)."""
    return Order(id=order_id, item="espresso machine", total_cents=24900)


confirm_with_customer = client_tool("confirm_with_customer", input=ConfirmIn, output=ConfirmOut)


@tool
async def issue_refund(ctx: ToolContext, order_id: str, cents: int) -> Refund:
    """Refund part of an order. Side-effecting: runs at most once per tool call."""
    row = FakePayments().refund(order_id, cents, ctx.idempotency_key)
    return Refund(order_id=order_id, cents=int(str(row["cents"])), provider_key=ctx.idempotency_key)


@issue_refund.verify
async def _refund_exists(ctx: ToolContext, order_id: str, cents: int) -> Refund | None:
    """After a crash mid-refund: ask the provider whether the refund went through."""
    if FakePayments().find(ctx.idempotency_key) is not None:
        return Refund(order_id=order_id, cents=cents, provider_key=ctx.idempotency_key)
    return None


support = Agent(
    "support",
    "You are a support agent. Look orders up, confirm with the customer, then refund.",
    tools=[get_order, confirm_with_customer, issue_refund],
    max_turns=8,
    budget_usd=1.0,
)

script = ScriptedModel(
    [
        calls(call("get_order", {"order_id": "A-42"}), text="Let me look that order up."),
        calls(call("confirm_with_customer", {"question": "Refund $249.00 for order A-42?"})),
        calls(call("issue_refund", {"order_id": "A-42", "cents": 24900})),
        "I refunded $249.00 for order A-42. Anything else?",
        "You're welcome!",
    ]
)


def model() -> Model:
    """OpenAIModel when an API key or an OpenAI-compatible base URL is configured."""
    if os.environ.get("OPENAI_API_KEY") or os.environ.get("OPENAI_BASE_URL"):
        from dbos_agents.models.openai import OpenAIModel

        return OpenAIModel(
            os.environ.get("DBOS_AGENTS_DEMO_MODEL", "gpt-4.1-mini"),
            base_url=os.environ.get("OPENAI_BASE_URL"),
        )
    return script


def runtime() -> AgentRuntime:
    return AgentRuntime([support], model())
