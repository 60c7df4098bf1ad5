"""The agent of the submit benchmarks: turn 0 calls the client tool ``confirm``, turn 1
answers. A ``ScriptedModel`` plays the model (no network), so what is measured is the
runtime's wait, submit and resume."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, client_tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

AGENT = "asker"


class ConfirmIn(BaseModel):
    """Ask the user to confirm something."""

    question: str


class ConfirmOut(BaseModel):
    ok: bool
    note: str = ""


confirm = client_tool("confirm", input=ConfirmIn, output=ConfirmOut)


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn == 0:
        return calls(call("confirm", {"question": "go ahead?"}))
    return "confirmed"


def asker_settings(**settings: Any) -> Settings:
    """The worker's settings: errors-only logging, no concurrency limit, plus ``settings``."""
    return Settings(log_level="ERROR", worker_concurrency=None, **settings)


def asker_runtime(settings: Settings, tool_timeout: timedelta) -> AgentRuntime:
    """One AgentRuntime with the asker agent (at most 3 turns) and the scripted model."""
    return AgentRuntime(
        [Agent(AGENT, tools=[confirm], max_turns=3, tool_timeout=tool_timeout)],
        ScriptedModel(respond=respond),
        settings=settings,
    )
