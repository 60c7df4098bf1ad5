"""The tool step: one server tool call (the model step is in ``model_step``).

The tool step holds the at-most-once guard. Under the call's advisory lock (so no earlier
attempt can still be running) it commits ``dispatched`` before the handler runs and the
result row before it returns. If the step body runs again (the worker died before DBOS
checkpointed its output): a recorded result is returned as is; otherwise any status past
``requested`` means an earlier attempt may have run, and a side-effecting handler is not
run a second time: ``verify`` settles the outcome, or the model gets a
``tool-durability-error`` result.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, TypedDict

from .. import _dbos
from ..results import ToolResult, durability_error
from ..tools import Tool, ToolContext
from . import drain, execution
from .context import get_context
from .crashpoints import crash_point

log = logging.getLogger("dbos_agents")


class RunInterrupted(Exception):
    """The run was interrupted (a wait was cancelled, or a call's run is fenced off): it
    stops as ``interrupted``."""


class ToolCallSpec(TypedDict):
    agent: str
    session_id: str
    root_session_id: str
    user_id: str | None
    tenant_id: str | None
    run_seq: int
    tool_call_id: str
    tool: str
    arguments: dict[str, Any]
    idempotency_key: str


async def tool_step(spec: ToolCallSpec) -> dict[str, Any]:
    """Run one server tool call under the at-most-once guard, as a DBOS step (the body of
    ``dbos_agents.tool.v1:<tool>``, in ``session.v1`` runs and approved calls); returns a
    ``ToolResult``."""
    async with drain.step():
        return await _guarded(spec, fenced=False)


async def tool_op(spec: ToolCallSpec) -> dict[str, Any]:
    """The same, with no DBOS checkpoint of its own (``session.v2``): the result row the
    attempt commits before returning is what a replay returns. So a replay first reads it,
    unless this execution already ran a step for real (``execution``: then this call is
    new). In place of DBOS's cancellation check at a step's start, the dispatch mark is
    fenced on the run (an interrupted run's call raises ``RunInterrupted``), and the
    handler runs outside the workflow's DBOS context, so a handler calling DBOS cannot
    shift the workflow's operation ids."""
    async with drain.step():
        if not execution.later_steps_are_new():
            recorded = await get_context().ledger.recorded_result(
                spec["session_id"], spec["tool_call_id"]
            )
            if recorded is not None:
                return recorded
        return await _guarded(spec, fenced=True)


async def _guarded(spec: ToolCallSpec, *, fenced: bool) -> dict[str, Any]:
    ctx = get_context()
    tool = ctx.agent(spec["agent"]).tools[spec["tool"]]
    args = tool.validate_arguments(spec["arguments"])
    async with ctx.ledger.attempt(
        spec["session_id"],
        spec["tool_call_id"],
        uuid.uuid4().hex,
        exclusive=not tool.safe_to_retry,
        run_seq=spec["run_seq"] if fenced else None,
    ) as attempt:
        if attempt.fenced:
            raise RunInterrupted(spec["tool_call_id"])
        if attempt.recorded is not None:  # an earlier attempt finished and recorded it
            return attempt.recorded  # (a replay: later steps may not be new)
        execution.step_ran()
        crash_point("after_dispatch_mark")
        tctx = ToolContext(
            session_id=spec["session_id"],
            root_session_id=spec["root_session_id"],
            tool_call_id=spec["tool_call_id"],
            tool_name=tool.name,
            idempotency_key=spec["idempotency_key"],
            user_id=spec["user_id"],
            tenant_id=spec["tenant_id"],
            attempt=attempt.number,
        )
        if attempt.prior_status != "requested" and not tool.safe_to_retry:
            settle = _settle_unknown(tool, tctx, args)  # an earlier attempt may have run
        else:
            settle = _invoke(tool, tctx, args)
        result = await (_dbos.outside_workflow(settle) if fenced else settle)
        crash_point("after_handler")
        recorded = await attempt.record(result.model_dump(mode="json"))
        crash_point("after_tool_result")
        return recorded


async def _invoke(tool: Tool, tctx: ToolContext, args: Any) -> ToolResult:
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


async def _settle_unknown(tool: Tool, tctx: ToolContext, args: Any) -> ToolResult:
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
