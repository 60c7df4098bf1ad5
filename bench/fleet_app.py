"""The worker app of bench/fleet.py: ``dbos-agents worker --app fleet_app:runtime``.

The agents are named by ``BENCH_FLEET_AGENTS`` (comma-separated, default ``a0``); each has
one side-effecting tool, ``noop``, that does nothing. The scripted model calls it
``BENCH_FLEET_TOOL_TURNS`` times (default 3), then answers: T + 1 model turns a session.
"""

from __future__ import annotations

import os

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

AGENTS_ENV = "BENCH_FLEET_AGENTS"
TURNS_ENV = "BENCH_FLEET_TOOL_TURNS"


@tool
async def noop(ctx: ToolContext, n: int) -> int:
    """Side-effecting (at most once per call), and does nothing."""
    return n


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < int(os.environ.get(TURNS_ENV, "3")):
        return calls(call("noop", {"n": turn}))
    return "done"


def runtime() -> AgentRuntime:
    names = [a for a in os.environ.get(AGENTS_ENV, "a0").split(",") if a]
    turns = int(os.environ.get(TURNS_ENV, "3"))
    agents = [Agent(name, tools=[noop], max_turns=turns + 2) for name in names]
    return AgentRuntime(agents, ScriptedModel(respond=respond))
