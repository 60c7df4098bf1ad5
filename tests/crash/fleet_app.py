"""Workers of two services on one database (mixed fleets): each runtime runs other agents.

``shop_runtime`` runs ``shop`` (with its sub-agent ``clerk``, who asks the user, and its
durable tool ``pack``, which asks mid-way), ``desk_runtime``
runs ``desk``; ``v1_runtime`` and ``v2_runtime`` are two releases of one service, the second
adding ``returns``. Every tool records the agent and the worker's executor id in the
witness, so a test sees where each run ran.
"""

from __future__ import annotations

import os
from datetime import timedelta

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ModelResponse, ToolContext, client_tool, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import Witness


@tool
async def where(ctx: ToolContext, agent: str) -> dict[str, str]:
    """Side-effecting: at most once, so a second record for a call would be a defect."""
    executor = os.environ.get("DBOS_AGENTS_EXECUTOR_ID", "")
    Witness().record("ran", agent=agent, session=ctx.session_id, executor=executor)
    return {"agent": agent, "executor": executor}


class AskIn(BaseModel):
    question: str


class AskOut(BaseModel):
    answer: str


ask = client_tool("ask", input=AskIn, output=AskOut, timeout=timedelta(minutes=5))


def _record(agent: str, session: str) -> dict[str, str]:
    executor = os.environ.get("DBOS_AGENTS_EXECUTOR_ID", "")
    Witness().record("ran", agent=agent, session=session, executor=executor)
    return {"agent": agent, "executor": executor}


@tool(durable=True)
async def pack(ctx: ToolContext, order: str) -> dict[str, str]:
    """A durable tool that asks the user mid-way: its child workflow waits in ``ctx.ask``."""
    answer = await ctx.ask(ask, {"question": f"pack {order}?"})
    return await ctx.step("record", _record, f"pack:{answer.answer}", ctx.session_id)


def _respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    first = request.messages[0].content or ""
    if request.agent == "shop" and first.startswith("pack"):
        if turn == 0:
            return calls(call("pack", {"order": first}))
        return f"shop packed: {first}"
    if request.agent == "shop" and first.startswith("ask"):
        # Through the sub-agent, who waits on the user: a child workflow mid-wait.
        if turn == 0:
            return calls(call("subagent__clerk", {"message": first}))
        return f"shop done: {first}"
    if request.agent == "clerk":
        if turn == 0:
            return calls(call("ask", {"question": first}))
        if turn == 1:
            return calls(call("where", {"agent": "clerk"}))
        return "clerk done"
    if turn == 0:
        return calls(call("where", {"agent": request.agent}))
    return f"{request.agent} done: {first}"


MODEL = ScriptedModel(respond=_respond)
CLERK = Agent("clerk", "asks the customer", tools=[ask, where])


def shop_runtime() -> AgentRuntime:
    shop = Agent("shop", tools=[where, pack], sub_agents=[CLERK], tool_timeout=timedelta(minutes=5))
    return AgentRuntime([shop], MODEL)


def desk_runtime() -> AgentRuntime:
    return AgentRuntime([Agent("desk", tools=[where])], MODEL)


def v1_runtime() -> AgentRuntime:
    return AgentRuntime([Agent("orders", tools=[where])], MODEL)


def v2_runtime() -> AgentRuntime:
    return AgentRuntime([Agent("orders", tools=[where]), Agent("returns", tools=[where])], MODEL)
