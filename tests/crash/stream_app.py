"""The app of the streaming crash tests: one agent answering through ``OpenAIModel``,
streamed, from the fake OpenAI server process at ``FAKE_OPENAI_URL``."""

from __future__ import annotations

import os

from dbos_agents import Agent, AgentRuntime
from dbos_agents.models import OpenAIModel

runtime = AgentRuntime(
    [Agent("writer", "Write what you are asked to.")],
    OpenAIModel(base_url=os.environ["FAKE_OPENAI_URL"], continuation="request", timeout=10.0),
)
