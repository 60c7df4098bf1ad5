"""A durable wait inside the session workflow, for a client tool's result or a human's
approval: ``recv`` on the call id.

No thread is held while waiting, the absolute deadline survives restarts (DBOS records the
``recv``'s end on its first execution), and a result submitted before the workflow reaches
the ``recv`` (or while the worker is down) is buffered in DBOS's notifications table.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Final

from dbos import DBOS

from ...delivery import Delivery, InterruptDelivery, decode
from ...outcome import RunSpec
from ...results import ToolResult
from ...traces import KEY as TRACE_KEY
from ...traces import spans
from ..context import get_context
from .base import RunInterrupted

log = logging.getLogger("dbos_agents")

TIMEOUT_KIND: Final = "client_tool_timeout"
"""The error kind of a wait that timed out (client tool or approval): the one kind of
call a late answer can come for."""


async def wait_for_submission(
    spec: RunSpec, kind: str, tool: str, tool_call_id: str, deadline: float, *, park: bool = True
) -> Delivery | None:
    """Wait for what a client submits; ``None`` when the deadline passed. An interrupt
    delivered to the wait raises ``RunInterrupted``.

    The timeout given to ``recv`` matters only on its first execution: DBOS records the end
    it fixes and every later execution (a replay, a recovery, a parked resume) keeps that
    end. So it is read from the clock here, not recorded by a step of its own. ``park``:
    the worker's receiver may park the wait (a session workflow's); a durable tool's wait
    stays in memory."""
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
    ctx = get_context()
    span = spans.start_wait(tool=tool, call_id=tool_call_id, kind=kind, deadline=deadline)
    try:
        received = await _received(spec, ctx, tool_call_id, remaining, deadline, park)
    except RunInterrupted:
        spans.end_wait(span, "interrupted")
        raise
    except asyncio.CancelledError:  # parked (or the worker stops): a later execution waits on
        spans.end_wait(span, "suspended")
        raise
    if received is None:
        spans.end_wait(span, "deadline")
        return None
    carrier, delivery = received
    spans.end_wait(span, "answered", carrier)
    return delivery


async def _received(
    spec: RunSpec, ctx: Any, tool_call_id: str, remaining: float, deadline: float, park: bool
) -> tuple[object, Delivery] | None:
    """The wait itself: the submit's trace carrier (if any) and what it delivered."""
    # A root session's long wait may park (``worker.parking``): rows only, until a submit or
    # the deadline resumes it.
    if park:
        payload = await ctx.receiver.recv(spec, tool_call_id, remaining, deadline)
    else:
        payload = await DBOS.recv_async(tool_call_id, timeout_seconds=remaining)
    if payload is None:
        status = await ctx.ledger.settle_timeout(spec["root_session_id"], tool_call_id)
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
    carrier = None
    if isinstance(payload, dict) and TRACE_KEY in payload:  # the submit's, for a span link
        carrier = payload[TRACE_KEY]
        payload = {k: v for k, v in payload.items() if k != TRACE_KEY}
    delivery = decode(payload)
    if isinstance(delivery, InterruptDelivery):
        log.info(
            "client_tool.aborted",
            extra={"event": "client_tool.aborted", "tool_call_id": tool_call_id},
        )
        raise RunInterrupted(tool_call_id)
    return carrier, delivery


def timeout_result(tool_call_id: str, tool: str, timeout_sec: float) -> ToolResult:
    return ToolResult.failure(
        tool_call_id,
        tool,
        TIMEOUT_KIND,
        f"No answer for {tool!r} arrived within {timeout_sec:g} seconds, so the call timed "
        "out. Tell the user, or try again if it still matters.",
    )


def mismatch(tool_call_id: str, tool: str, delivery: Delivery) -> ToolResult:
    return ToolResult.failure(
        tool_call_id, tool, "client-error", f"unexpected submission of kind {delivery.kind!r}"
    )
