"""Prometheus metrics of one app (its own registry, so several apps can share a process).

Labels carry route templates (``/sessions/{session_id}/pending``), never session ids, so
``GET /metrics`` is served without auth; turn it off with ``metrics_enabled=False``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import BaseRoute
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..records import QueuedRuns

CONTENT_TYPE = CONTENT_TYPE_LATEST
T = TypeVar("T")
log = logging.getLogger("dbos_agents.server")

PendingSummary = Callable[[], "tuple[int, float] | None"]
"""How many calls are open and the oldest one's age in seconds (None: not known yet)."""
QueuedSummary = Callable[[], "list[QueuedRuns] | None"]
"""Per agent, the runs waiting on its queue (None: not known yet)."""


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter(
            "dbos_agents_http_requests",
            "HTTP requests by method, route template and status code.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "dbos_agents_http_request_duration_seconds",
            "Time to the end of the response, by method and route template.",
            ["method", "route"],
            registry=self.registry,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60),
        )
        self.submits = Counter(
            "dbos_agents_submits",
            "Submits by body kind and outcome (accepted, already_completed, unknown_tool_call,"
            " late_answer_after_timeout, or the error code).",
            ["kind", "outcome"],
            registry=self.registry,
        )

    def watch_pending(self, summary: PendingSummary) -> None:
        """Export the pending gauges, computed by ``summary`` at each scrape."""
        self.registry.register(PendingCollector(summary))

    def watch_queued(self, summary: QueuedSummary) -> None:
        """Export the queued-runs gauges per agent, computed by ``summary`` at each scrape."""
        self.registry.register(QueuedCollector(summary))

    def render(self) -> bytes:
        return generate_latest(self.registry)


class _Scraped(Collector, Generic[T]):
    """Gauges computed by ``summary`` at each scrape, from one aggregate query; a scrape
    while the database is away shows none of them rather than failing."""

    what = ""
    """The gauges' name in the warning when their query fails."""

    def __init__(self, summary: Callable[[], T | None], empty: T) -> None:
        self.summary = summary
        self._empty = empty

    def _families(self, got: T) -> list[Metric]:
        raise NotImplementedError

    def describe(self) -> Iterable[Metric]:
        return self._families(self._empty)  # names only: no query at registration

    def collect(self) -> Iterable[Metric]:
        try:
            got = self.summary()
        except Exception:  # a scrape must not fail because the database is away
            log.warning(f"{self.what} gauges unavailable", exc_info=True)
            return []
        return [] if got is None else self._families(got)


class PendingCollector(_Scraped["tuple[int, float]"]):
    """``dbos_agents_pending_calls`` and ``dbos_agents_pending_oldest_age_seconds`` (all
    tenants: counts only, no ids)."""

    what = "pending"

    def __init__(self, summary: PendingSummary) -> None:
        super().__init__(summary, (0, 0.0))

    def _families(self, got: tuple[int, float]) -> list[Metric]:
        count, oldest = got
        return [
            GaugeMetricFamily(
                "dbos_agents_pending_calls",
                "Open client-tool calls and approvals (waiting for a human or a client).",
                value=count,
            ),
            GaugeMetricFamily(
                "dbos_agents_pending_oldest_age_seconds",
                "Age of the oldest open client-tool call or approval (0 when none).",
                value=oldest,
            ),
        ]


class QueuedCollector(_Scraped["list[QueuedRuns]"]):
    """``dbos_agents_queued_runs`` and ``dbos_agents_queued_oldest_age_seconds`` per agent
    (the agents of the fleet's queues: a bounded label)."""

    what = "queued-run"

    def __init__(self, summary: QueuedSummary) -> None:
        super().__init__(summary, [])

    def _families(self, got: list[QueuedRuns]) -> list[Metric]:
        runs = GaugeMetricFamily(
            "dbos_agents_queued_runs",
            "Runs waiting on their agent's queue for a worker that runs the agent.",
            labels=["agent"],
        )
        oldest = GaugeMetricFamily(
            "dbos_agents_queued_oldest_age_seconds",
            "How long the run waiting longest on the agent's queue has waited.",
            labels=["agent"],
        )
        for r in got:
            runs.add_metric([r.agent], r.runs)
            oldest.add_metric([r.agent], r.oldest_age_sec)
        return [runs, oldest]


METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
"""Label values for the method; anything else is counted as ``other``, so junk methods
cannot create unbounded series."""


class MetricsMiddleware:
    """Counts every response, including the 411/413 of the body-limit middleware inside."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500
        started = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            template = (
                route.path
                if isinstance(route, BaseRoute) and hasattr(route, "path")
                else "unmatched"
            )
            method = str(scope.get("method", ""))
            method = method if method in METHODS else "other"  # a client picks the method
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - started)
