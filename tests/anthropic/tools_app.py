"""The app of the Anthropic worker test: an agent with a tool, on ``AnthropicModel`` with
extended thinking, streamed, against the fake server at ``FAKE_ANTHROPIC_URL``."""

from __future__ import annotations

import os

from dbos_agents import Agent, AgentRuntime, tool
from dbos_agents.models import AnthropicModel


@tool(safe_to_retry=True)
async def lookup(order_id: str) -> str:
    """Where an order is."""
    return f"{order_id} shipped on Monday"


runtime = AgentRuntime(
    [Agent("support", "You track orders.", tools=[lookup])],
    AnthropicModel(
        "claude-haiku-4-5",
        base_url=os.environ["FAKE_ANTHROPIC_URL"],
        thinking_budget=1024,
        max_tokens=4096,
        timeout=10.0,
    ),
)
