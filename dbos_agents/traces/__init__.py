"""Traces: every run, model call, tool call and wait as OpenTelemetry spans, one trace
across crashes and human waits (docs/traces.md). Definitions only: this package imports
``opentelemetry-api`` and never dbos or sqlalchemy; the loop calls it."""

from .carrier import KEY, Carrier, capture, extract, from_headers, of
from .setup import configured_by_env, reset, tracer

__all__ = [
    "KEY",
    "Carrier",
    "capture",
    "configured_by_env",
    "extract",
    "from_headers",
    "of",
    "reset",
    "tracer",
]
