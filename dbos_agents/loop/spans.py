"""Where the loop meets ``traces``: the spans of a turn's calls, started before the calls
are prepared (a sub-agent or a durable tool carries its call's span to its child workflow)
and ended as each call ends. A call an earlier execution already ran, replayed from its
recorded result, gets no span; the check reads the ledger only when tracing is on and this
execution has not yet run a step body (``execution``)."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from contextlib import nullcontext
from typing import Any

from opentelemetry.trace import Span

from ..agent import Agent
from ..messages import ModelResponse
from ..models.base import ModelRequest
from ..outcome import RunSpec
from ..results import ToolResult
from ..traces import spans
from ..traces.setup import tracer
from . import execution
from .calls.base import CallResult, Planned, Turn
from .context import get_context

_UNKNOWN = "tool-durability-error"
_TIMED_OUT = "client_tool_timeout"


def outcome_of(result: ToolResult) -> tuple[str, str | None]:
    """Our outcome of a call and, when it failed, its error kind."""
    if result.error is None:
        return "ok", None
    kind = result.error.kind
    if kind == _UNKNOWN:
        return "unknown_outcome", kind
    if kind == _TIMED_OUT:
        return "timed_out", kind
    return "error", kind


async def open_calls(turn: Turn, planned: list[Planned]) -> None:
    """Start the span of every planned call this execution really runs."""
    if tracer() is None or not planned:
        return
    ledger = get_context().ledger
    fresh = execution.later_steps_are_new()
    for p in planned:
        if not fresh:
            recorded = await ledger.recorded_result(turn.spec["session_id"], p.call.id)
            if recorded is not None:
                continue
        span = spans.start_tool(
            tool=p.call.name, call_id=p.call.id, kind=p.kind.name, turn=turn.number
        )
        if span is not None:
            turn.spans[p.call.id] = span


def ran(
    turn: Turn, p: Planned, call: Coroutine[Any, Any, CallResult]
) -> Coroutine[Any, Any, CallResult]:
    """The call's run with its span current, ending the span with its outcome; the run as
    it is when the call has no span (no frame added to a waiting call's await chain)."""
    span: Span | None = turn.spans.pop(p.call.id, None)
    return call if span is None else _ran(span, call)


async def _ran(span: Span, call: Coroutine[Any, Any, CallResult]) -> CallResult:
    try:
        with spans.use(span):
            res = await call
    except asyncio.CancelledError:  # parked, or the worker stops: a later execution goes on
        spans.end_tool(span, "suspended")
        raise
    except BaseException as exc:
        spans.end_tool(span, "error", type(exc).__name__)
        raise
    spans.end_tool(span, *outcome_of(res.result))
    return res


def chat(spec: RunSpec, agent: Agent, turn: int, request: ModelRequest) -> Any:
    """The ``chat`` span of a model call that really happens (``traces.spans.chat``)."""
    if tracer() is None:
        return nullcontext()
    model = get_context().model_for(agent.name)
    provider = getattr(model, "provider", None)
    messages = None
    if spans.content_enabled():  # opt-in: the conversation is not dumped otherwise
        messages = [m.model_dump(mode="json", exclude_none=True) for m in request.messages]
    return spans.chat(
        model=model.name,
        provider=provider if isinstance(provider, str) else None,
        session_id=spec["session_id"],
        turn=turn,
        messages=messages,
    )


def chat_ended(span: Span | None, response: ModelResponse) -> None:
    if span is None:
        return
    spans.chat_ended(
        span,
        provider=response.provider,
        response_model=response.model,
        tokens=(response.usage.input_tokens, response.usage.output_tokens),
        cost_usd=response.usage.cost_usd,
        finish_reason="tool_calls" if response.tool_calls else "stop",
        output={"text": response.text, "tool_calls": [c.name for c in response.tool_calls]},
    )
