"""A server tool call: an attempt under the at-most-once guard, whose ledger row is its
checkpoint (no DBOS step of its own).

Under the call's advisory lock (so no earlier attempt can still be running) the attempt
commits ``dispatched`` before the handler runs and the result row before it returns. Run
again (a replay, a recovery, an adoption): a recorded result is returned as is; otherwise
any status past ``requested`` means an earlier attempt may have run, and a side-effecting
handler is not run a second time: ``verify`` settles the outcome, or the model gets a
``tool-durability-error`` result. In place of DBOS's cancellation check at a step's start,
the dispatch mark is fenced on the run (an interrupted run's call raises
``RunInterrupted``), and the handler runs outside the workflow's DBOS context, so a handler
calling DBOS cannot shift the workflow's operation ids.
"""

from __future__ import annotations

import logging
import uuid
from typing import ClassVar

from pydantic import BaseModel

from ... import _dbos
from ...agent import Agent
from ...ids import idempotency_key
from ...messages import JSONValue, ToolCall
from ...outcome import RunSpec
from ...records import forwarded_props_of
from ...results import ToolResult, durability_error
from ...state import StateChanges
from ...store.calls import CallKind
from ...store.state import StateCommit
from ...tools import Tool, ToolContext
from .. import drain, execution
from ..context import get_context
from ..crashpoints import crash_point
from ..ledger import WaitSpec
from .base import CallResult, Planned, RunInterrupted, Turn

log = logging.getLogger("dbos_agents")


class ServerKind:
    name: ClassVar[CallKind] = "server"
    concurrent: ClassVar[bool] = True
    dispatched_on_open: ClassVar[bool] = False

    def wait(self, agent: Agent, p: Planned) -> WaitSpec | None:
        return None

    async def prepare(self, turn: Turn, p: Planned) -> object:
        return None

    async def run(self, turn: Turn, p: Planned, prepared: object) -> CallResult:
        tool = turn.agent.tools[p.call.name]
        return CallResult(await tool_op(turn.spec, p.call, tool, p.args), recorded=True)


async def tool_op(spec: RunSpec, call: ToolCall, tool: Tool, args: BaseModel) -> ToolResult:
    """Run the call (see the module doc). A replay first reads its result row, unless this
    execution already ran a step for real (``execution``: then this call is new)."""
    async with drain.step():
        if not execution.later_steps_are_new():
            recorded = await get_context().ledger.recorded_result(spec["session_id"], call.id)
            if recorded is not None:
                return recorded
        return await _guarded(spec, call, tool, args, fenced=True)


async def approved_step(
    spec: RunSpec, call: ToolCall, tool: Tool, args: BaseModel
) -> dict[str, JSONValue]:
    """An approved call, as the body of the DBOS step ``dbos_agents.tool.v1:<tool>``: its
    output is the result as JSON (what DBOS records and replays)."""
    async with drain.step():
        result = await _guarded(spec, call, tool, args, fenced=False)
        return result.model_dump(mode="json")


async def _guarded(
    spec: RunSpec, call: ToolCall, tool: Tool, args: BaseModel, *, fenced: bool
) -> ToolResult:
    ctx = get_context()
    schema = ctx.agent(spec["agent"]).state_schema
    async with ctx.ledger.attempt(
        spec["session_id"],
        call.id,
        uuid.uuid4().hex,
        exclusive=not tool.safe_to_retry,
        run_seq=spec["run_seq"] if fenced else None,
        with_state=schema is not None,
    ) as attempt:
        if attempt.fenced:
            raise RunInterrupted(call.id)
        if attempt.recorded is not None:  # an earlier attempt finished and recorded it
            return attempt.recorded  # (a replay: later steps may not be new)
        execution.step_ran()
        crash_point("after_dispatch_mark")
        tctx = ToolContext(
            session_id=spec["session_id"],
            root_session_id=spec["root_session_id"],
            tool_call_id=call.id,
            tool_name=tool.name,
            idempotency_key=idempotency_key(spec["session_id"], call.id),
            user_id=spec["user_id"],
            tenant_id=spec["tenant_id"],
            attempt=attempt.number,
            changes=None
            if schema is None
            else StateChanges(schema, spec["session_id"], attempt.state),
            forwarded_props=forwarded_props_of(spec),
        )
        if attempt.prior_status != "requested" and not tool.safe_to_retry:
            settle = _settle_unknown(tool, tctx, args)  # an earlier attempt may have run
        else:
            settle = _invoke(tool, tctx, args)
        result = await (_dbos.outside_workflow(settle) if fenced else settle)
        crash_point("after_handler")
        recorded = await attempt.record(result, state_commit(result, tctx.changes))
        crash_point("after_tool_result")
        return recorded


def state_commit(result: ToolResult, changes: StateChanges | None) -> StateCommit | None:
    """How the call's state changes commit with its result: only a successful call's, each
    folded onto the latest committed state; one that no longer validates (or an update
    function that raises) turns the result into a tool error and stores nothing."""
    if changes is None or not changes.ops or not result.ok:
        return None

    def commit(latest: JSONValue | None) -> tuple[ToolResult, dict[str, JSONValue] | None]:
        try:
            return result, changes.fold(latest)
        except Exception as exc:
            return _state_error(result, exc), None

    return commit


def _state_error(result: ToolResult, exc: Exception) -> ToolResult:
    log.info(
        "tool state change refused",
        extra={"event": "tool_state_invalid", "tool": result.tool},
    )
    return ToolResult.failure(
        result.tool_call_id, result.tool, "tool-error", f"{type(exc).__name__}: {exc}"
    )


async def _invoke(tool: Tool, tctx: ToolContext, args: BaseModel) -> ToolResult:
    try:
        output = await tool.run(tctx, args)
    except Exception as exc:
        log.info(
            "tool raised",
            extra={"event": "tool_error", "tool": tool.name, "tool_call_id": tctx.tool_call_id},
        )
        return ToolResult.failure(
            tctx.tool_call_id, tool.name, "tool-error", f"{type(exc).__name__}: {exc}"
        )
    return ToolResult.success(tctx.tool_call_id, tool.name, output)


async def _settle_unknown(tool: Tool, tctx: ToolContext, args: BaseModel) -> ToolResult:
    """An earlier attempt may have run the handler: ask ``verify``, never guess."""
    log.warning(
        "side-effecting tool outcome unknown after a crash",
        extra={
            "event": "tool_outcome_unknown",
            "tool": tool.name,
            "tool_call_id": tctx.tool_call_id,
        },
    )
    if tool.verify_fn is None:
        return durability_error(tctx.tool_call_id, tool.name)
    try:
        happened, output = await tool.run_verify(tctx, args)
    except Exception as exc:
        return durability_error(
            tctx.tool_call_id, tool.name, f"verify failed: {type(exc).__name__}: {exc}"
        )
    if happened:
        return ToolResult.success(tctx.tool_call_id, tool.name, output, verified=True)
    return await _invoke(tool, tctx, args)  # verify says the effect did not happen
