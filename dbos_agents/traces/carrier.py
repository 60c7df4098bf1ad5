"""Trace context as it travels with a run: a W3C ``traceparent`` (and ``tracestate``)
carrier, stored in the run's workflow input, a persistent session's inbox message or a
submit's message, so every execution of the run (a recovery after a SIGKILL, a deploy, a
parked wait resumed) reads the same parent from what DBOS recorded.

A run that arrived with no context gets a parent made from its own identity (session and
run number): every execution of it then lands in the same trace, under a remote parent
that no process exports.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

Carrier = dict[str, str]
KEY = "trace"
"""The key of a carrier in a run's input, an inbox message and a submit's message."""

_W3C = TraceContextTextMapPropagator()


def capture(ctx: otel_context.Context | None = None) -> Carrier | None:
    """The current (or given) span's context as a carrier; ``None`` when no valid span is
    active (nothing to propagate: the common, untraced case costs one lookup)."""
    span = trace.get_current_span(ctx)
    if not span.get_span_context().is_valid:
        return None
    carrier: Carrier = {}
    _W3C.inject(carrier, context=ctx)
    return carrier or None


def extract(carrier: object) -> trace.SpanContext | None:
    """The span context a carrier names; ``None`` for anything malformed (ignored)."""
    if not isinstance(carrier, Mapping):
        return None
    clean = {k: v for k, v in carrier.items() if isinstance(k, str) and isinstance(v, str)}
    try:
        ctx = _W3C.extract(clean)
    except Exception:
        return None
    sc = trace.get_current_span(ctx).get_span_context()
    return sc if sc.is_valid else None


def from_headers(headers: Mapping[str, str]) -> Carrier | None:
    """A request's ``traceparent``/``tracestate``, if they parse (a malformed one: None)."""
    raw = {k: headers[k] for k in ("traceparent", "tracestate") if k in headers}
    return raw if raw.get("traceparent") and extract(raw) is not None else None


def of(mapping: Mapping[str, object]) -> Carrier | None:
    """The carrier stored under ``KEY`` in a run's input or a message, if well-formed."""
    value = mapping.get(KEY)
    return dict(value) if isinstance(value, dict) and extract(value) is not None else None


def derived_parent(*identity: object) -> trace.SpanContext:
    """A remote, sampled parent whose ids are a function of ``identity``: every execution of
    a run that came without a context shares one trace."""
    digest = hashlib.sha256("\x1f".join(map(str, identity)).encode()).digest()
    trace_id = int.from_bytes(digest[:16], "big") or 1
    span_id = int.from_bytes(digest[16:24], "big") or 1
    return trace.SpanContext(
        trace_id, span_id, is_remote=True, trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED)
    )


def parent_context(carrier: Carrier | None, *identity: object) -> otel_context.Context:
    """The context a run's span starts under: the stored carrier's, else ``derived_parent``."""
    sc = extract(carrier) if carrier is not None else None
    return trace.set_span_in_context(trace.NonRecordingSpan(sc or derived_parent(*identity)))


def link_to(carrier: object) -> trace.Link | None:
    """A span link to a submit's context (``None`` when there is none, or it is malformed)."""
    sc = extract(carrier)
    return trace.Link(sc) if sc is not None else None


def of_span(span: trace.Span | None) -> dict[str, Carrier]:
    """What a child workflow's input carries to start under ``span`` (``{}`` untraced)."""
    if span is None:
        return {}
    carrier = capture(trace.set_span_in_context(span))
    return {KEY: carrier} if carrier else {}
