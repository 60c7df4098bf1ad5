"""The app of the shutdown and outage tests: ``tests/crash/app.py`` plus slow tools.

- ``slow_charge``: side-effecting, takes ``DBOS_AGENTS_TEST_SLOW_SEC`` (2 s) on the event loop,
  records the effect at its end: a SIGTERM during it must let it finish.
- ``block_loop``: side-effecting and badly written: ``time.sleep`` inside an async tool blocks
  the event loop for ``DBOS_AGENTS_TEST_BLOCK_SEC`` (8 s); heartbeats must go on meanwhile.
"""

from __future__ import annotations

import asyncio
import os
import time
from datetime import timedelta

from dbos_agents import Agent, AgentRuntime, ToolContext, tool
from dbos_agents.models import ScriptedModel
from dbos_agents.testing import Witness

from .app import _on_call, _respond, ask_long, charge, lookup, refund


@tool
async def slow_charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Side-effecting and slow; the effect is recorded when it completes."""
    Witness().record("start", tool="slow_charge", key=ctx.idempotency_key, session=ctx.session_id)
    await asyncio.sleep(float(os.environ.get("DBOS_AGENTS_TEST_SLOW_SEC", "2")))
    Witness().record("effect", tool="slow_charge", key=ctx.idempotency_key, session=ctx.session_id)
    return {"charged": cents, "order_id": order_id}


@tool
async def block_loop(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Blocks the whole event loop (a sync call in an async tool)."""
    time.sleep(float(os.environ.get("DBOS_AGENTS_TEST_BLOCK_SEC", "8")))  # noqa: ASYNC251
    Witness().record("effect", tool="block_loop", key=ctx.idempotency_key, session=ctx.session_id)
    return {"blocked": True, "order_id": order_id}


def runtime() -> AgentRuntime:
    model = ScriptedModel(respond=_respond, on_call=_on_call)
    crashy = Agent("crashy", "test agent", tools=[charge, lookup, refund, slow_charge, block_loop])
    fleet = Agent(
        "fleet", "asks, then charges", tools=[ask_long, charge], tool_timeout=timedelta(minutes=5)
    )
    return AgentRuntime([crashy, fleet], model)
