"""Whether we trace, and the tracer: a tracer provider the user set up in code, else one
built from the standard ``OTEL_*`` variables (the SDK is imported only then: the ``otel``
extra), else nothing at all.

Off is a cached check: no SDK import, no span objects, no context work. An exporter that
fails (a bad endpoint, a collector that is down) drops its spans in the SDK's background
thread and says so once, never once per batch, and never slows a run.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from opentelemetry import trace

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

log = logging.getLogger("dbos_agents")

SCOPE = "dbos_agents"
_ENV_KEYS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
)
_lock = threading.Lock()
_tracer: trace.Tracer | None = None
_env_checked = False


def configured_by_env() -> bool:
    """The standard variables ask for traces (and ``OTEL_SDK_DISABLED`` does not refuse)."""
    if os.environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporter = os.environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":
        return False
    return any(os.environ.get(k, "").strip() for k in _ENV_KEYS)


def flush(timeout_sec: float = 2.0) -> None:
    """Export the spans still queued, for a process that leaves without running its atexit
    hooks (the worker's ``os._exit``, where the SDK's own flush at exit never runs): a
    clean shutdown must not lose a run's last spans. Nothing when we never traced."""
    if _tracer is None:
        return
    force_flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if callable(force_flush):
        try:
            force_flush(int(timeout_sec * 1000))
        except Exception:  # best effort on the way out: a collector that is down
            log.debug("traces not flushed on exit", exc_info=True)


def tracer() -> trace.Tracer | None:
    """Our tracer, or ``None`` when nothing would receive spans (the cheap check)."""
    global _tracer, _env_checked
    if _tracer is not None:
        return _tracer
    provider = trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider):  # nobody set one up in code
        if _env_checked:
            return None
        with _lock:
            if not _env_checked:
                _env_checked = True
                if configured_by_env():
                    _install_from_env()
        provider = trace.get_tracer_provider()
        if isinstance(provider, trace.ProxyTracerProvider):
            return None
    _tracer = provider.get_tracer(SCOPE)
    return _tracer


def reset() -> None:
    """Forget the tracer (tests that swap providers)."""
    global _tracer, _env_checked
    with _lock:
        _tracer, _env_checked = None, False


def _install_from_env() -> None:
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        log.warning(
            "OTEL_* variables ask for traces but the OpenTelemetry SDK is not installed: "
            "pip install 'dbos-agents[otel]'",
            extra={"event": "traces_unavailable"},
        )
        return
    exporter = _exporter()
    if exporter is None:
        return
    provider = TracerProvider(resource=Resource.create())  # OTEL_SERVICE_NAME, ..._ATTRIBUTES
    provider.add_span_processor(BatchSpanProcessor(_warn_once(exporter)))
    trace.set_tracer_provider(provider)


def _exporter() -> SpanExporter | None:
    names = [
        n.strip().lower()
        for n in os.environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",")
        if n.strip()
    ]
    name = names[0] if names else "otlp"
    try:
        if name == "console":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter()
        if name == "otlp":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            # The exporter logs every failed batch (errors, retries); ``_warn_once`` says it once.
            logging.getLogger("opentelemetry.exporter.otlp").setLevel(logging.CRITICAL)
            return OTLPSpanExporter()  # endpoint, headers, timeout: the OTEL_* variables
    except ImportError:
        pass
    log.warning(
        "OTEL_TRACES_EXPORTER=%s is not available here (installed: otlp, console with the "
        "otel extra): no traces",
        name,
        extra={"event": "traces_unavailable"},
    )
    return None


def _warn_once(inner: SpanExporter) -> SpanExporter:
    """``inner``, dropping what it cannot export and saying so once per process."""
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    class WarnOnce(SpanExporter):
        warned = False

        def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
            try:
                result = inner.export(spans)
            except Exception as exc:
                self._warn(f"{type(exc).__name__}: {exc}")
                return SpanExportResult.FAILURE
            if result is not SpanExportResult.SUCCESS:
                self._warn("the exporter refused the batch")
            return result

        def _warn(self, why: str) -> None:
            if not self.warned:
                self.warned = True
                log.warning(
                    "traces are not being exported (%s): spans are dropped; runs go on",
                    why,
                    extra={"event": "traces_export_failed"},
                )

        def shutdown(self) -> None:
            inner.shutdown()

        def force_flush(self, timeout_millis: int = 30000) -> bool:
            return inner.force_flush(timeout_millis)

    return WarnOnce()
