"""The app of the bridge's worker tests: agents on ``PydanticAIModel`` over Pydantic AI's
``GoogleModel``, streamed, against the fake Gemini server at ``FAKE_GEMINI_URL``."""

from __future__ import annotations

import os

from pydantic_ai.models.google import GoogleModel
from pydantic_ai.providers.google import GoogleProvider

from dbos_agents import Agent, AgentRuntime, tool
from dbos_agents.models import PydanticAIModel


@tool(safe_to_retry=True)
async def lookup(order_id: str) -> str:
    """Where an order is."""
    return f"{order_id} shipped on Monday"


def gemini() -> GoogleModel:
    provider = GoogleProvider(api_key="fake-key", base_url=os.environ["FAKE_GEMINI_URL"])
    return GoogleModel("gemini-2.5-flash", provider=provider)


runtime = AgentRuntime(
    [
        Agent("support", "You track orders.", tools=[lookup]),
        Agent("writer", "Write what you are asked to."),
    ],
    PydanticAIModel(gemini),
)
