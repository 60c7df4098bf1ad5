"""A durable tool's workflow (``dbos_agents.durable_tool.v1``): the body of a
``@tool(durable=True)`` call, run as a child workflow of the session.

DBOS recovers it like the session (a crash, a deploy: the next worker with the executor id,
or an adopter), and every execution runs the body from its start: completed inner steps
return their recorded outputs (``ops``), so the work done is kept. Each execution counts
itself in the call's row (``store.durable``); a recovered one first asks the tool's
``on_recovered`` hook. The body runs under the tool's timeout (an absolute deadline fixed
by the first execution) and is cancelled when its run ends meanwhile (an interrupt: the
worker hears the run's end on its LISTEN connection). The result is recorded in the call's
ledger row, with the state change it made, before the workflow returns it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from typing import Any, Final, NotRequired, TypedDict

from dbos import DBOS
from pydantic import BaseModel

from ... import traces
from ...agent import Agent
from ...errors import StepOutcomeUnknownError
from ...ids import DURABLE_WORKFLOW_NAME, idempotency_key
from ...mcp import ListedTool
from ...mcp.tool import MCPTool
from ...mcp.wire import Outcome
from ...messages import JSONValue
from ...outcome import RunSpec
from ...records import forwarded_props_of
from ...results import ToolResult, durability_error
from ...state import StateChanges
from ...store import durable as rows
from ...store import pg
from ...store import state as state_rows
from ...store.retry import fetch_one, retry_transient
from ...tool_context import ToolContext
from ...tools import Tool
from ...traces import spans
from .. import drain, elsewhere
from ..calls.base import RunInterrupted
from ..calls.server import state_commit
from ..context import get_context
from ..run_end import RunEnd
from .ops import Call, Ops

log = logging.getLogger("dbos_agents")

INTERRUPTED: Final = "interrupted"
"""The error kind a durable call's workflow returns when its run was interrupted (the
parent then stops as interrupted; nothing is recorded for the call)."""
TIMEOUT_KIND: Final = "tool-timeout"


class DurableJob(TypedDict):
    spec: RunSpec
    tool: str
    tool_call_id: str
    arguments: str
    turn: int
    mcp: NotRequired[dict[str, JSONValue]]
    """An MCP call's continuation: the server, the recorded listing and the first round's
    questions (``MCPTool.ref``)."""


def _tool(agent: Agent, job: DurableJob) -> Tool:
    """The call's tool: the agent's own, or the MCP tool its run listed."""
    ref = job.get("mcp")
    if ref is None:
        return agent.tools[job["tool"]]
    listed = ListedTool.model_validate(ref["tool"])
    first = None if ref.get("first") is None else Outcome.model_validate(ref["first"])
    return MCPTool(agent.mcp_servers[str(ref["server"])], listed, job["tool"], first)


@DBOS.workflow(name=DURABLE_WORKFLOW_NAME)
async def durable_tool_workflow(job: DurableJob) -> dict[str, JSONValue]:
    """Run the call's body (see the module doc); returns its ``ToolResult`` as JSON."""
    return (await _run(job)).model_dump(mode="json")


async def _run(job: DurableJob) -> ToolResult:
    spec, cid = job["spec"], job["tool_call_id"]
    ctx = get_context()
    agent = ctx.agents.get(spec["agent"])
    if agent is None:  # recovered onto a worker that lacks the agent: back to the agent's queue
        await elsewhere.hand_back(spec)
    tool = _tool(agent, job)
    wf = DBOS.workflow_id
    assert wf is not None
    engine = ctx.ledger.ds.engine
    ended = RunEnd(spec)  # listening before the begin: no interrupt falls in between
    try:
        stmt = rows.begin_stmt(
            spec["session_id"],
            cid,
            wf,
            spec["run_seq"],
            tool.name,
            None if tool.timeout is None else tool.timeout.total_seconds(),
            uuid.uuid4().hex,
        )
        async with drain.step():
            begun = rows.begun(await fetch_one(engine, stmt, "begin durable tool"))
        if not begun.live:
            return _interrupted(cid, tool.name)
        call = Call(spec, agent, tool.name, cid, job["turn"], wf)
        ops = Ops(engine, call, begun)
        schema = agent.state_schema
        base = None if schema is None else await state_rows.latest(engine, spec["session_id"])
        tctx = ToolContext(
            session_id=spec["session_id"],
            root_session_id=spec["root_session_id"],
            tool_call_id=cid,
            tool_name=tool.name,
            idempotency_key=idempotency_key(spec["session_id"], cid),
            user_id=spec["user_id"],
            tenant_id=spec["tenant_id"],
            attempt=begun.executions,
            changes=None if schema is None else StateChanges(schema, spec["session_id"], base),
            durable=ops,
            forwarded_props=forwarded_props_of(spec),
        )
        args = tool.validate_arguments(json.loads(job["arguments"]))
        body = _body(tool, tctx, args, ops)
        with spans.under(traces.of(spec)):  # its steps' spans go under the call's
            result = await _bounded(body, begun.deadline, ended, cid, tool)
    finally:
        ended.close()
    if result.error is not None and result.error.kind == INTERRUPTED:
        return result
    return await _record(spec, cid, tool, result, tctx.changes)


async def _body(tool: Tool, tctx: ToolContext, args: BaseModel, ops: Ops) -> ToolResult:
    """The hook of a recovered execution, then the body; the body's errors become the
    result the model reads (an unknown inner outcome: a durability error)."""
    cid, name = tctx.tool_call_id, tool.name
    try:
        if ops.recovered and tool.recovered_fn is not None:
            done, output = await tool.run_recovered(tctx, args)
            if done:
                await ops.flush()
                return ToolResult.success(cid, name, output)
        output = await tool.run(tctx, args)
        await ops.flush()
    except StepOutcomeUnknownError as exc:
        return durability_error(cid, name, str(exc))
    except RunInterrupted:
        return _interrupted(cid, name)
    except Exception as exc:  # DurableToolError included: the model reads it
        log.info("durable tool raised", extra={"event": "tool_error", "tool": name})
        return ToolResult.failure(cid, name, "tool-error", f"{type(exc).__name__}: {exc}")
    return ToolResult.success(cid, name, output)


async def _bounded(
    body: Any, deadline: float | None, ended: RunEnd, cid: str, tool: Tool
) -> ToolResult:
    """The body, cancelled at the tool's deadline or when its run ends meanwhile."""
    task: asyncio.Task[ToolResult] = asyncio.ensure_future(body)
    watch = asyncio.ensure_future(ended.wait())
    timeout = None if deadline is None else max(0.0, deadline - time.time())
    try:
        done, _ = await asyncio.wait({task, watch}, timeout=timeout, return_when="FIRST_COMPLETED")
    except BaseException:
        task.cancel()
        watch.cancel()
        raise
    watch.cancel()
    if task in done:
        return task.result()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    if watch in done:
        return _interrupted(cid, tool.name)
    seconds = 0.0 if tool.timeout is None else tool.timeout.total_seconds()
    return ToolResult.failure(
        cid,
        tool.name,
        TIMEOUT_KIND,
        f"The tool {tool.name!r} did not finish within its timeout of {seconds:g} seconds and"
        " was stopped; inner steps it completed keep their effects.",
    )


async def _record(
    spec: RunSpec, cid: str, tool: Tool, result: ToolResult, changes: StateChanges | None
) -> ToolResult:
    """The result in the call's ledger row (with its state change), then the call ended."""
    ledger = get_context().ledger
    async with (
        drain.step(),
        ledger.attempt(spec["session_id"], cid, uuid.uuid4().hex, exclusive=False) as attempt,
    ):
        recorded = await attempt.record(result, state_commit(result, changes))
        status = "completed" if recorded.ok else "failed"
        await retry_transient(
            "end durable tool",
            lambda: pg.script(ledger.ds.engine, [rows.end_stmt(spec["session_id"], cid, status)]),
        )
    ledger.announce(spec)
    return recorded


def _interrupted(cid: str, tool: str) -> ToolResult:
    return ToolResult.failure(cid, tool, INTERRUPTED, "The run was interrupted.")
