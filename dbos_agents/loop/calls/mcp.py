"""An MCP tool's call (``dbos_agents.mcp``; docs/mcp.md). Its first ``tools/call`` round is
an attempt under the at-most-once guard, as a server tool's (``calls.server``): a call the
server answers at once costs what a server tool costs, and its ledger row is its
checkpoint. A server that asks questions first (``input_required``) hands the call to a
continuation, the durable tool workflow ``{parent}::tool::{call}`` (``loop.durable``),
started outside the session's DBOS context with the questions and the server's state as
its input: it asks them as durable waits and makes the next rounds as inner steps. The
session awaits it, and a re-executed session finds it again rather than settling the call
as unknown. Nothing here draws a DBOS operation id of the session, so the kind runs beside
the turn's other calls.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from dbos import DBOS, SetWorkflowID, WorkflowHandleAsync
from dbos import error as dbos_errors

from ... import _dbos
from ...agent import Agent
from ...ids import durable_workflow_id, idempotency_key
from ...mcp.tool import Arguments, MCPTool
from ...mcp.wire import Outcome
from ...messages import JSONValue
from ...results import ToolResult
from ...store.calls import CallKind
from .. import drain, execution
from ..context import get_context
from ..crashpoints import crash_point
from ..durable.workflow import INTERRUPTED, DurableJob, durable_tool_workflow
from ..ledger import WaitSpec
from .base import CallResult, Planned, RunInterrupted, Turn

Continuation = WorkflowHandleAsync[dict[str, JSONValue]]


class MCPKind:
    name: ClassVar[CallKind] = "server"
    concurrent: ClassVar[bool] = True
    dispatched_on_open: ClassVar[bool] = False

    def wait(self, agent: Agent, p: Planned) -> WaitSpec | None:
        return None

    async def prepare(self, turn: Turn, p: Planned) -> object:
        return None

    async def run(self, turn: Turn, p: Planned, prepared: object) -> CallResult:
        tool = turn.agent.tools[p.call.name]
        assert isinstance(tool, MCPTool) and isinstance(p.args, Arguments)
        first = await _first_round(turn, p, tool, p.args.root)
        if isinstance(first, ToolResult):
            return CallResult(first, recorded=True)
        return CallResult(await _continued(first, p.call.id, tool.name), recorded=True)


async def _first_round(
    turn: Turn, p: Planned, tool: MCPTool, arguments: dict[str, JSONValue]
) -> ToolResult | Continuation:
    spec, cid = turn.spec, p.call.id
    sid = spec["session_id"]
    ledger = get_context().ledger
    parent = DBOS.workflow_id
    assert parent is not None
    wf = durable_workflow_id(parent, cid)
    key = idempotency_key(sid, cid)
    job = DurableJob(
        spec=spec,
        tool=tool.name,
        tool_call_id=cid,
        arguments=p.call.arguments,
        turn=turn.number,
        mcp=tool.ref(),
    )
    async with drain.step():
        if not execution.later_steps_are_new():
            recorded = await ledger.recorded_result(sid, cid)
            if recorded is not None:
                return recorded
        async with ledger.attempt(
            sid, cid, uuid.uuid4().hex, exclusive=not tool.policy.retry, run_seq=spec["run_seq"]
        ) as attempt:
            if attempt.fenced:
                raise RunInterrupted(cid)
            if attempt.recorded is not None:
                return attempt.recorded
            execution.step_ran()
            crash_point("after_dispatch_mark")
            if attempt.prior_status != "requested":  # an earlier attempt got this far
                found = await _dbos.outside_workflow(_found(wf))
                if found is not None:  # its questions went to a continuation: await it
                    return found
                out = (
                    await _dbos.outside_workflow(tool.round(arguments, key))
                    if tool.policy.retry
                    else Outcome(kind="unknown", error="the worker stopped during the call")
                )
            else:
                out = await _dbos.outside_workflow(tool.round(arguments, key))
            crash_point("after_handler")
            settled = await _dbos.outside_workflow(tool.settle(cid, arguments, key, out))
            if isinstance(settled, Outcome):  # questions first: the continuation asks them
                job["mcp"] = tool.ref(settled)
                return await _dbos.outside_workflow(_start(wf, job))
            recorded = await attempt.record(settled, None)
            crash_point("after_tool_result")
            return recorded


async def _found(wf: str) -> Continuation | None:
    """The call's continuation, if an earlier execution started it."""
    try:
        return await DBOS.retrieve_workflow_async(wf)
    except dbos_errors.DBOSNonExistentWorkflowError:
        return None


async def _start(wf: str, job: DurableJob) -> Continuation:
    """The continuation, started (a workflow id starts once)."""
    with SetWorkflowID(wf):
        return await DBOS.start_workflow_async(durable_tool_workflow, job)


async def _continued(handle: Continuation, cid: str, name: str) -> ToolResult:
    """The continuation's result (recorded in the call's ledger row by the continuation).
    Outside a drain step: the questions may wait for days."""
    try:
        raw: Any = await _dbos.outside_workflow(handle.get_result())
    except dbos_errors.DBOSAwaitedWorkflowCancelledError:  # an interrupt cancelled it
        raise RunInterrupted(cid) from None
    except dbos_errors.DBOSException:
        raise
    except Exception as exc:  # its workflow failed outside the body (an outage)
        return ToolResult.failure(cid, name, "tool-error", f"{type(exc).__name__}: {exc}")
    result = ToolResult.model_validate(raw)
    if result.error is not None and result.error.kind == INTERRUPTED:
        raise RunInterrupted(cid)
    return result
