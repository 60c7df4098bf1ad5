"""Durable waits inside the session workflow: client tools, approvals and sub-agents.

A wait is ``DBOS.recv_async(topic=tool_call_id)``: no thread is held, the absolute deadline
is stored by DBOS and survives restarts, and a result submitted before the workflow reaches
``recv`` (or while the worker is down) is buffered in the notifications table.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Final

from dbos import DBOS, SetWorkflowID
from dbos import error as dbos_errors
from pydantic import ValidationError

from ..agent import Agent
from ..delivery import (
    ApprovalDelivery,
    Delivery,
    ErrorDelivery,
    InterruptDelivery,
    ResultDelivery,
    decode,
)
from ..outcome import RunOutcome, RunSpec
from ..results import ToolResult
from .context import get_context
from .steps import RunInterrupted, ToolCallSpec, tool_step

log = logging.getLogger("dbos_agents")


async def wait_for_submission(
    spec: RunSpec, kind: str, tool: str, tool_call_id: str, deadline: float
) -> Delivery | None:
    """Wait for what ``AgentClient`` submits; ``None`` when the deadline passed. An
    interrupt delivered to the wait raises ``RunInterrupted``.

    The timeout given to ``recv`` matters only on its first execution: DBOS records the end
    it fixes and every later execution (a replay, a recovery, a parked resume) keeps that
    end. So it is read from the clock here, not recorded by a step of its own."""
    remaining = max(0.0, deadline - time.time())
    log.info(
        "client_tool.suspended",
        extra={
            "event": "client_tool.suspended",
            "session_id": spec["session_id"],
            "tool_call_id": tool_call_id,
            "tool": tool,
            "kind": kind,
            "deadline": deadline,
        },
    )
    # A root session's long wait parks (``parking``): rows only, until a submit or the
    # deadline resumes it.
    payload = await get_context().parker.recv(spec, tool_call_id, remaining, deadline)
    if payload is None:
        status = await get_context().ledger.settle_timeout(spec["root_session_id"], tool_call_id)
        if status == "submitted":  # a submit committed just as the deadline passed: use it
            payload = await DBOS.recv_async(tool_call_id, timeout_seconds=30)
        elif status == "cancelled":
            raise RunInterrupted(tool_call_id)
        else:
            log.warning(
                "client_tool.timeout",
                extra={
                    "event": "client_tool.timeout",
                    "session_id": spec["session_id"],
                    "tool_call_id": tool_call_id,
                    "deadline": deadline,
                },
            )
            return None
    delivery = decode(payload)
    if isinstance(delivery, InterruptDelivery):
        log.warning(
            "client_tool.aborted",
            extra={"event": "client_tool.aborted", "tool_call_id": tool_call_id},
        )
        raise RunInterrupted(tool_call_id)
    return delivery


TIMEOUT_KIND: Final = "client_tool_timeout"
"""The error kind of a wait that timed out (client tool or approval): the one kind of
call a late answer can come for."""


def timeout_result(tool_call_id: str, tool: str, timeout_sec: float) -> ToolResult:
    return ToolResult.failure(
        tool_call_id,
        tool,
        TIMEOUT_KIND,
        f"No answer for {tool!r} arrived within {timeout_sec:g} seconds, so the call timed "
        "out. Tell the user, or try again if it still matters.",
    )


def _mismatch(tool_call_id: str, tool: str, delivery: Delivery) -> ToolResult:
    return ToolResult.failure(
        tool_call_id, tool, "client-error", f"unexpected submission of kind {delivery.kind!r}"
    )


async def run_client_call(
    spec: RunSpec, tool: str, tool_call_id: str, deadline: float, timeout_sec: float
) -> ToolResult:
    delivery = await wait_for_submission(spec, "client", tool, tool_call_id, deadline)
    if delivery is None:
        return timeout_result(tool_call_id, tool, timeout_sec)
    if isinstance(delivery, ErrorDelivery):
        return ToolResult.failure(tool_call_id, tool, "client-error", delivery.error)
    if isinstance(delivery, ResultDelivery):
        return _checked_result(spec, tool, tool_call_id, delivery.result)
    return _mismatch(tool_call_id, tool, delivery)


def _checked_result(spec: RunSpec, tool: str, tool_call_id: str, result: Any) -> ToolResult:
    """The submitted result, validated against the client tool's output model as declared
    (the submit checked only the JSON schema stored with the wait): a mismatch becomes an
    error result the model reads, never a failed run."""
    ct = get_context().agent(spec["agent"]).client_tools.get(tool)
    if ct is not None:
        try:
            ct.output.model_validate(result)
        except ValidationError as exc:
            return ToolResult.failure(
                tool_call_id,
                tool,
                "client-error",
                f"the submitted result does not match the output model of {tool!r}",
                details=json.loads(exc.json(include_url=False, include_context=False)),
            )
    return ToolResult.success(tool_call_id, tool, result)


async def run_approval_call(
    spec: RunSpec, call: ToolCallSpec, deadline: float, timeout_sec: float
) -> ToolResult:
    cid, tool = call["tool_call_id"], call["tool"]
    delivery = await wait_for_submission(spec, "approval", tool, cid, deadline)
    if delivery is None:
        return timeout_result(cid, tool, timeout_sec)
    if isinstance(delivery, ErrorDelivery):
        return ToolResult.failure(cid, tool, "client-error", delivery.error)
    if not isinstance(delivery, ApprovalDelivery):
        return _mismatch(cid, tool, delivery)
    if not delivery.approved:
        return ToolResult.failure(
            cid,
            tool,
            "approval-denied",
            "A human denied this call"
            + (f" ({delivery.decided_by})" if delivery.decided_by else "")
            + (f": {delivery.reason}" if delivery.reason else "."),
        )
    out = await DBOS.run_step_async({"name": f"dbos_agents.tool.v1:{tool}"}, tool_step, call)
    return ToolResult.model_validate(out)


def child_session_id(parent_workflow_id: str, tool_call_id: str) -> str:
    return f"{parent_workflow_id}::sub::{tool_call_id}"


async def start_sub_agent(spec: RunSpec, sub: Agent, tool_call_id: str, arguments: str) -> Any:
    """Start the child workflow (deterministic id); returns its handle."""
    from .workflow import session_workflow

    parent_wf = DBOS.workflow_id
    assert parent_wf is not None
    child = child_session_id(parent_wf, tool_call_id)
    message = str(json.loads(arguments).get("message", ""))
    child_spec = RunSpec(
        session_id=child,
        root_session_id=spec["root_session_id"],
        parent_session_id=spec["session_id"],
        agent=sub.name,
        run_seq=1,
        message=message,
        user_id=spec["user_id"],
        tenant_id=spec["tenant_id"],
    )
    with SetWorkflowID(child):
        return await DBOS.start_workflow_async(session_workflow, child_spec)


async def finish_sub_agent(handle: Any, tool: str, tool_call_id: str) -> ToolResult:
    try:
        outcome = RunOutcome.model_validate(await handle.get_result())
    except dbos_errors.DBOSAwaitedWorkflowCancelledError:  # the child was interrupted
        raise RunInterrupted(tool_call_id) from None
    if outcome.status == "interrupted":
        raise RunInterrupted(tool_call_id)
    if outcome.status == "completed":
        return ToolResult.success(tool_call_id, tool, outcome.output or "")
    return ToolResult.failure(
        tool_call_id,
        tool,
        "subagent-failed",
        f"The sub-agent stopped with status {outcome.status}"
        + (f": {outcome.error}" if outcome.error else ""),
    )
