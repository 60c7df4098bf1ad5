"""The app of the Anthropic crash test: one agent answering through ``AnthropicModel``,
streamed, from the fake Anthropic server process at ``FAKE_ANTHROPIC_URL``."""

from __future__ import annotations

import os

from dbos_agents import Agent, AgentRuntime
from dbos_agents.models import AnthropicModel

runtime = AgentRuntime(
    [Agent("writer", "Write what you are asked to.")],
    AnthropicModel("claude-haiku-4-5", base_url=os.environ["FAKE_ANTHROPIC_URL"], timeout=10.0),
)
