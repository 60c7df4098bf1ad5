"""Run ``tests.traces.app``'s ``tracer`` agent in this process with an in-memory span
exporter, answer its waits, and print every span as a JSON line
(``python -m tests.traces.inmemory_run DATABASE_URL``). A process of its own: DBOS is a
process-wide singleton, and a tracer provider can be set once."""

from __future__ import annotations

import asyncio
import json
import sys
import time

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from dbos_agents import AgentClient, AgentRuntime, Settings

from .app import AGENTS, MODEL


def _until(pred, what: str, within: float = 60):  # type: ignore[no-untyped-def]
    for _ in range(int(within / 0.05)):
        value = pred()
        if value:
            return value
        time.sleep(0.05)
    raise TimeoutError(what)


def scenario(client: AgentClient, caller: trace.Tracer) -> dict[str, str]:
    with caller.start_as_current_span("caller start") as span:
        sid = client.start("tracer", "go")
        ids = {"start": format(span.get_span_context().span_id, "016x"), "session": sid}
    waits = _until(
        lambda: (
            {p.tool: p for p in client.pending(session_id=sid)}
            if len(client.pending(session_id=sid)) >= 1
            else None
        ),
        "the first wait",
    )
    assert "confirm" in waits, waits
    with caller.start_as_current_span("caller submit") as span:
        client.submit_tool_result(sid, waits["confirm"].tool_call_id, result={"ok": True})
        ids["submit"] = format(span.get_span_context().span_id, "016x")
    approval = _until(
        lambda: [p for p in client.pending(session_id=sid) if p.tool == "wire"], "the approval"
    )[0]
    with caller.start_as_current_span("caller approve") as span:
        client.submit_approval(sid, approval.tool_call_id, True, decided_by="op")
        ids["approve"] = format(span.get_span_context().span_id, "016x")
    _until(lambda: client.session(sid).status == "completed", "the run's end")
    ids["keeper"] = keeper = client.start("keeper", "hello")
    _until(lambda: client.session(keeper).status == "completed", "keeper's first run")
    with caller.start_as_current_span("caller follow-up") as span:
        client.send(keeper, "again")
        ids["follow_up"] = format(span.get_span_context().span_id, "016x")
    _until(
        lambda: (
            client.session(keeper).status == "completed" and client.session(keeper).run_seq == 2
        ),
        "keeper's second run",
    )
    return ids


async def main(url: str) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    settings = Settings(database_url=url, executor_id="traces-inmemory")
    settings.queue_polling_interval_sec = 0.05
    rt = AgentRuntime(AGENTS, MODEL, settings=settings)
    await rt.launch()
    client = AgentClient(url)
    try:
        ids = await asyncio.to_thread(scenario, client, provider.get_tracer("test"))
        await asyncio.sleep(0.3)  # the workflows' last spans end as they return
    finally:
        client.close()
        await rt.shutdown()
    print(json.dumps({"ids": ids}))
    for s in exporter.get_finished_spans():
        print(
            json.dumps(
                {
                    "name": s.name,
                    "trace": format(s.context.trace_id, "032x"),
                    "id": format(s.context.span_id, "016x"),
                    "parent": format(s.parent.span_id, "016x") if s.parent else None,
                    "kind": s.kind.name,
                    "attributes": dict(s.attributes or {}),
                    "links": [format(link.context.span_id, "016x") for link in s.links],
                    "start": s.start_time,
                    "end": s.end_time,
                },
                default=list,
            )
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
