"""Request spans: each HTTP request as an OpenTelemetry ``SERVER`` span, under the caller's
``traceparent`` when it sends one (a malformed one is ignored), current while the route
runs, so a run it starts or a wait it answers carries the request's context. Off (no
tracer provider, no ``OTEL_*`` variables): one check per request, nothing else."""

from __future__ import annotations

from typing import Any

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..traces import extract
from ..traces.setup import tracer


class TracingMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        t = tracer() if scope["type"] == "http" else None
        if t is None:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        sc = extract({k: headers[k] for k in ("traceparent", "tracestate") if k in headers})
        parent = trace.set_span_in_context(trace.NonRecordingSpan(sc)) if sc else None
        method = scope.get("method", "GET")
        span = t.start_span(
            method,
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "url.path": scope.get("path", "")},
        )
        status: dict[str, Any] = {}

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            with trace.use_span(span, end_on_exit=False):
                await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None)
            if isinstance(path, str):
                span.update_name(f"{method} {path}")
                span.set_attribute("http.route", path)
            code = status.get("code")
            if isinstance(code, int):
                span.set_attribute("http.response.status_code", code)
                if code >= 500:
                    span.set_status(Status(StatusCode.ERROR))
            span.end()
