"""Our spans, by the GenAI conventions (``conventions``): ``invoke_agent {agent}`` per run,
``chat {model}`` per model call, ``execute_tool {tool}`` per tool call, ``wait {tool}`` per
wait for a human or a client. Every helper is a no-op costing one check when tracing is off
(``setup.tracer``); message content is recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, as the conventions ask.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar

from opentelemetry import trace
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from . import conventions as c
from .carrier import Carrier, extract, link_to, parent_context
from .setup import tracer

CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"


def content_enabled() -> bool:
    return os.environ.get(CONTENT_ENV, "").strip().lower() == "true"


@contextmanager
def run(
    *,
    agent: str,
    session_id: str,
    run_seq: int,
    carrier: Carrier | None,
    resumed: bool,
    provider: str | None = None,
) -> Iterator[Span | None]:
    """The ``invoke_agent`` span of one execution of a run, current while it runs, under
    the run's stored context (``carrier``): every execution of a run is in one trace."""
    t = tracer()
    if t is None:
        yield None
        return
    attrs: dict[str, str | int | bool] = {
        c.OPERATION_NAME: c.INVOKE_AGENT,
        c.AGENT_NAME: agent,
        c.CONVERSATION_ID: session_id,
        c.RUN_SEQ: run_seq,
        c.RESUMED: resumed,
    }
    if provider:
        attrs[c.PROVIDER_NAME] = provider
    span = t.start_span(
        f"{c.INVOKE_AGENT} {agent}",
        context=parent_context(carrier, session_id, run_seq),
        kind=SpanKind.INTERNAL,
        attributes=attrs,
    )
    try:
        with trace.use_span(span, end_on_exit=False, set_status_on_exception=False):
            yield span
    except asyncio.CancelledError:  # parked, or the worker stops: a later execution goes on
        span.set_attribute(c.RUN_STATUS, "suspended")
        raise
    finally:
        span.end()


def run_ended(
    span: Span | None, status: str, turns: int, tokens: tuple[int, int], error: str | None
) -> None:
    if span is None:
        return
    span.set_attribute(c.RUN_STATUS, status)
    span.set_attribute("dbos_agents.run.turns", turns)
    span.set_attribute(c.INPUT_TOKENS, tokens[0])
    span.set_attribute(c.OUTPUT_TOKENS, tokens[1])
    if error is not None:
        span.set_attribute(c.ERROR_TYPE, status)
        span.set_status(Status(StatusCode.ERROR, error[:500]))


@contextmanager
def chat(
    *, model: str, provider: str | None, session_id: str, turn: int, messages: object = None
) -> Iterator[Span | None]:
    """A ``chat`` span around one model call that really happens (a recorded turn read back
    from the database gets none)."""
    t = tracer()
    if t is None or not trace.get_current_span().is_recording():
        yield None
        return
    attrs: dict[str, str | int] = {
        c.OPERATION_NAME: c.CHAT,
        c.REQUEST_MODEL: model,
        c.CONVERSATION_ID: session_id,
        c.TURN: turn,
    }
    if provider:
        attrs[c.PROVIDER_NAME] = provider
    if messages is not None and content_enabled():
        attrs[c.INPUT_MESSAGES] = json.dumps(messages, default=str)
    with t.start_as_current_span(
        f"{c.CHAT} {model}", kind=SpanKind.CLIENT, attributes=attrs
    ) as span:
        yield span


def chat_ended(
    span: Span | None,
    *,
    provider: str | None,
    response_model: str | None,
    tokens: tuple[int, int],
    cost_usd: float,
    finish_reason: str,
    output: object = None,
) -> None:
    if span is None:
        return
    if provider:
        span.set_attribute(c.PROVIDER_NAME, provider)
    if response_model:
        span.set_attribute(c.RESPONSE_MODEL, response_model)
    span.set_attribute(c.INPUT_TOKENS, tokens[0])
    span.set_attribute(c.OUTPUT_TOKENS, tokens[1])
    span.set_attribute(c.COST_USD, cost_usd)
    span.set_attribute(c.FINISH_REASONS, [finish_reason])
    if output is not None and content_enabled():
        span.set_attribute(c.OUTPUT_MESSAGES, json.dumps(output, default=str))


def start_tool(*, tool: str, call_id: str, kind: str, turn: int) -> Span | None:
    """An ``execute_tool`` span, started (not current: ``use`` makes it so where the call
    runs); ``None`` when tracing is off or the run's span is not recording."""
    t = tracer()
    if t is None or not trace.get_current_span().is_recording():
        return None
    return t.start_span(
        f"{c.EXECUTE_TOOL} {tool}",
        kind=SpanKind.INTERNAL,
        attributes={
            c.OPERATION_NAME: c.EXECUTE_TOOL,
            c.TOOL_NAME: tool,
            c.TOOL_CALL_ID: call_id,
            c.TOOL_TYPE: "function",
            c.TOOL_KIND: kind,
            c.TURN: turn,
        },
    )


def end_tool(span: Span | None, outcome: str, error_kind: str | None = None) -> None:
    if span is None:
        return
    span.set_attribute(c.TOOL_OUTCOME, outcome)
    if error_kind is not None:
        span.set_attribute(c.ERROR_TYPE, error_kind)
        span.set_status(Status(StatusCode.ERROR, error_kind))
    span.end()


_tool: ContextVar[Span | None] = ContextVar("dbos_agents_tool_span", default=None)


@contextmanager
def use(span: Span | None) -> Iterator[None]:
    """``span``, a tool call's, as the current span (a no-op for ``None``)."""
    if span is None:
        yield
        return
    token = _tool.set(span)
    try:
        with trace.use_span(span, end_on_exit=False):
            yield
    finally:
        _tool.reset(token)


def start_wait(*, tool: str, call_id: str, kind: str, deadline: float | None) -> Span | None:
    """A ``wait {tool}`` span from now until the answer or the deadline, under the call's
    span; none when the call has none (a replayed call, or tracing is off)."""
    t = tracer()
    if t is None or _tool.get() is None or _tool.get() is not trace.get_current_span():
        return None
    attrs: dict[str, str | float] = {c.WAIT_KIND: kind, c.TOOL_NAME: tool, c.TOOL_CALL_ID: call_id}
    if deadline is not None:
        attrs["dbos_agents.wait.deadline"] = deadline
    return t.start_span(f"wait {tool}", kind=SpanKind.INTERNAL, attributes=attrs)


def end_wait(span: Span | None, end: str, submit: object = None) -> None:
    """End a wait: ``answered``, ``deadline`` or ``interrupted``; ``submit``: the submit's
    carrier, linked from the wait and its tool span (the work the answer released)."""
    if span is None:
        return
    span.set_attribute(c.WAIT_END, end)
    link = link_to(submit)
    if link is not None:
        span.add_link(link.context, {"dbos_agents.link": "submit"})
        parent = trace.get_current_span()
        if parent.is_recording():
            parent.add_link(link.context, {"dbos_agents.link": "submit"})
    span.end()


def step(name: str) -> AbstractContextManager[object]:
    """A span for a durable tool's inner step that runs (a recorded one gets none)."""
    t = tracer()
    if t is None or not trace.get_current_span().get_span_context().is_valid:
        return nullcontext()
    return t.start_as_current_span(f"step {name}", attributes={c.STEP_NAME: name})


def under(carrier: Carrier | None) -> AbstractContextManager[object]:
    """The stored ``carrier``'s span as the current parent (a durable tool's body runs in a
    workflow of its own, under its call's span); a no-op untraced."""
    sc = extract(carrier) if carrier is not None and tracer() is not None else None
    return nullcontext() if sc is None else trace.use_span(trace.NonRecordingSpan(sc))
