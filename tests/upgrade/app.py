"""The agents of the upgrade test, run by a worker of the previous release and then by one
of this tree's code (``test_previous_release.py``).

The test copies this file into a directory of its own as ``upgrade_app.py`` and puts only
that directory on the workers' ``PYTHONPATH``, so each worker imports ``dbos_agents`` from
its own venv. It must therefore import with the previous release as well as with the
current code: only the public API both have (``Agent``, ``AgentRuntime``, ``tool``,
``client_tool``, ``ToolContext``, ``dbos_agents.models``), nothing from ``tests``.

Tools record what they do in the file named by ``UPGRADE_EFFECTS`` (one JSON line per
event, outside the worker), so the test can count effects across the SIGKILL. ``charge``
and ``refund`` block while the file named by ``UPGRADE_RELEASE`` does not exist: the test
kills the old worker in the middle of them and creates the file before the new worker runs.
"""

from __future__ import annotations

import json
import os
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel

from dbos_agents import Agent, AgentRuntime, ToolContext, client_tool, tool
from dbos_agents.models import ScriptedModel, call, calls

if TYPE_CHECKING:
    from dbos_agents import ModelResponse
    from dbos_agents.models import ModelRequest

EFFECTS_ENV = "UPGRADE_EFFECTS"
RELEASE_ENV = "UPGRADE_RELEASE"
LONG = timedelta(hours=1)
"""Every wait's timeout: nothing in the test may time out."""


def record(event: str, **fields: object) -> None:
    """Append one JSON line to the effects file (one write: lines never interleave)."""
    line = json.dumps({"event": event, "pid": os.getpid(), **fields}, sort_keys=True) + "\n"
    fd = os.open(os.environ[EFFECTS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def effects(path: Path, event: str, tool: str) -> list[dict[str, object]]:
    """The effects file's lines for ``event`` of ``tool`` (the test reads them)."""
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e for e in lines if e["event"] == event and e["tool"] == tool]


def _until_released() -> None:
    release = Path(os.environ[RELEASE_ENV])
    while not release.exists():
        time.sleep(0.05)


@tool
def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Side-effecting, no verify (a sync handler: it runs in a thread). The charge
    happens, then the tool hangs until released."""
    record("effect", tool="charge", key=ctx.idempotency_key, session=ctx.session_id)
    record("started", tool="charge", key=ctx.idempotency_key, session=ctx.session_id)
    _until_released()
    return {"charged": cents, "order_id": order_id}


@tool
def refund(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Side-effecting with verify: hangs until released, then the refund happens."""
    record("started", tool="refund", key=ctx.idempotency_key, session=ctx.session_id)
    _until_released()
    record("effect", tool="refund", key=ctx.idempotency_key, session=ctx.session_id)
    return {"refunded": cents, "order_id": order_id}


@refund.verify
def _refund_happened(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object] | None:
    path = Path(os.environ[EFFECTS_ENV])
    happened = any(e["key"] == ctx.idempotency_key for e in effects(path, "effect", "refund"))
    record("verify", tool="refund", key=ctx.idempotency_key, happened=happened)
    return {"refunded": cents, "order_id": order_id} if happened else None


@tool(requires_approval=True, approval_timeout=LONG)
async def close_account(ctx: ToolContext, account_id: str) -> dict[str, object]:
    """Side-effecting, approval-gated."""
    record("effect", tool="close_account", key=ctx.idempotency_key, session=ctx.session_id)
    return {"closed": account_id}


class AskIn(BaseModel):
    question: str


class AskOut(BaseModel):
    answer: str


ask = client_tool("ask", input=AskIn, output=AskOut, timeout=LONG)


def _respond(request: ModelRequest) -> str | ModelResponse:
    """Decides from the transcript alone (a recovered worker plays the same turn): the
    run's first turn calls the agent's tool, the next one answers with the last result."""
    messages = request.messages
    last_user = max(i for i, m in enumerate(messages) if m.role == "user")
    text = messages[last_user].content or ""
    results = [m.content or "" for m in messages[last_user + 1 :] if m.role == "tool"]
    if results:
        return f"{request.agent} got: {results[-1]}"
    if text.startswith("reply:") or request.agent in ("concierge", "echo"):
        return f"{request.agent} answers {text!r} after {len(messages)} messages"
    if request.agent in ("asker", "helper"):
        return calls(call("ask", {"question": text}))
    if request.agent == "closer":
        return calls(call("close_account", {"account_id": text}))
    if request.agent == "payments":  # the message names the tool
        return calls(call(text, {"order_id": f"order-{text}", "cents": 500}))
    if request.agent == "manager":
        return calls(call("subagent__helper", {"message": text}))
    raise AssertionError(f"no script for agent {request.agent!r}")


def runtime() -> AgentRuntime:
    """The worker's ``--app upgrade_app:runtime`` (settings from ``DBOS_AGENTS_*``)."""
    helper = Agent("helper", "asks the user for the manager", tools=[ask], tool_timeout=LONG)
    agents = [
        Agent("asker", "asks the user", tools=[ask], tool_timeout=LONG),
        Agent("closer", "closes accounts once approved", tools=[close_account]),
        Agent("payments", "charges and refunds", tools=[charge, refund]),
        Agent("manager", "delegates to its helper", sub_agents=[helper], tool_timeout=LONG),
        Agent("concierge", "stays for the next message", persistent=True, idle_ttl=LONG),
        Agent("echo", "answers at once"),
    ]
    return AgentRuntime(agents, ScriptedModel(respond=_respond))
