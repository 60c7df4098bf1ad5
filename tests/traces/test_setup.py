"""Off and free, configured by the standard variables, bad input ignored, a dead collector
warned about once: each in a fresh interpreter (a tracer provider is set once a process)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

from dbos_agents import traces
from dbos_agents.traces import conventions

REPO = Path(__file__).resolve().parents[2]


def _python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_off_imports_no_sdk_and_makes_no_tracer() -> None:
    done = _python(
        """
        import sys
        import dbos_agents, dbos_agents.worker, dbos_agents.server, dbos_agents.loop.workflow
        from dbos_agents.traces import tracer, spans
        assert tracer() is None
        with spans.run(agent="a", session_id="s", run_seq=1, carrier=None, resumed=False) as s:
            assert s is None
        assert not [m for m in sys.modules if m.startswith("opentelemetry.sdk")], "SDK imported"
        print("ok")
        """
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_the_standard_variables_turn_it_on() -> None:
    done = _python(
        """
        import sys
        from dbos_agents.traces import tracer, spans
        with spans.run(agent="a", session_id="s", run_seq=1, carrier=None, resumed=False) as s:
            assert s is not None and s.is_recording()
        print("ok")
        """,
        OTEL_TRACES_EXPORTER="console",
        OTEL_SERVICE_NAME="svc-under-test",
    )
    assert "ok" in done.stdout.splitlines(), done.stderr
    assert '"name": "invoke_agent a"' in done.stdout
    assert '"service.name": "svc-under-test"' in done.stdout


def test_none_exporter_and_sdk_disabled_stay_off() -> None:
    for env in ({"OTEL_TRACES_EXPORTER": "none"}, {"OTEL_SDK_DISABLED": "true",
                "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}):  # fmt: skip
        done = _python("from dbos_agents.traces import tracer; print(tracer())", **env)
        assert done.stdout.strip() == "None", (env, done.stderr)


def test_a_dead_collector_is_warned_about_once_and_costs_the_run_nothing() -> None:
    done = _python(
        """
        import logging, time
        logging.basicConfig(level=logging.WARNING)
        from dbos_agents.traces import spans
        from opentelemetry import trace
        started = time.perf_counter()
        for i in range(300):
            with spans.run(agent="a", session_id=f"s{i}", run_seq=1, carrier=None,
                           resumed=False):
                time.sleep(0.001)
        print(f"elapsed {time.perf_counter() - started:.3f}")
        trace.get_tracer_provider().force_flush()
        time.sleep(0.5)
        """,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",  # nothing listens there
        OTEL_EXPORTER_OTLP_TIMEOUT="1",
        OTEL_BSP_SCHEDULE_DELAY="20",
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE="20",
    )
    elapsed = float(done.stdout.split()[-1])
    assert elapsed < 3.0, done.stdout  # 300 runs of ~1 ms: the exporter never blocks them
    assert done.stderr.count("traces are not being exported") == 1, done.stderr[-2000:]
    assert "Failed to export" not in done.stderr  # the exporter's own line per batch


def test_malformed_context_is_ignored() -> None:
    good = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert traces.from_headers({"traceparent": good}) == {"traceparent": good}
    for bad in ("garbage", "00-00000000000000000000000000000000-b7ad6b7169203331-01",
                "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01", "", "x" * 5000):  # fmt: skip
        assert traces.from_headers({"traceparent": bad}) is None
        assert traces.of({"trace": {"traceparent": bad}}) is None
    assert traces.of({"trace": ["not", "a", "dict"]}) is None
    assert traces.extract({"traceparent": 42}) is None


def test_a_run_without_context_gets_one_trace_for_all_its_executions() -> None:
    from dbos_agents.traces.carrier import derived_parent

    assert derived_parent("ses_1", 1) == derived_parent("ses_1", 1)
    assert derived_parent("ses_1", 1).trace_id != derived_parent("ses_1", 2).trace_id


def test_attribute_names_are_the_conventions() -> None:
    from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as g

    for ours, theirs in (
        (conventions.OPERATION_NAME, g.GEN_AI_OPERATION_NAME),
        (conventions.PROVIDER_NAME, g.GEN_AI_PROVIDER_NAME),
        (conventions.AGENT_NAME, g.GEN_AI_AGENT_NAME),
        (conventions.CONVERSATION_ID, g.GEN_AI_CONVERSATION_ID),
        (conventions.REQUEST_MODEL, g.GEN_AI_REQUEST_MODEL),
        (conventions.RESPONSE_MODEL, g.GEN_AI_RESPONSE_MODEL),
        (conventions.FINISH_REASONS, g.GEN_AI_RESPONSE_FINISH_REASONS),
        (conventions.INPUT_TOKENS, g.GEN_AI_USAGE_INPUT_TOKENS),
        (conventions.OUTPUT_TOKENS, g.GEN_AI_USAGE_OUTPUT_TOKENS),
        (conventions.TOOL_NAME, g.GEN_AI_TOOL_NAME),
        (conventions.TOOL_CALL_ID, g.GEN_AI_TOOL_CALL_ID),
        (conventions.TOOL_TYPE, g.GEN_AI_TOOL_TYPE),
        (conventions.INPUT_MESSAGES, g.GEN_AI_INPUT_MESSAGES),
        (conventions.OUTPUT_MESSAGES, g.GEN_AI_OUTPUT_MESSAGES),
    ):
        assert ours == theirs
    ops = g.GenAiOperationNameValues
    assert ops.CHAT.value == conventions.CHAT
    assert ops.EXECUTE_TOOL.value == conventions.EXECUTE_TOOL
    assert ops.INVOKE_AGENT.value == conventions.INVOKE_AGENT


def test_requests_are_server_spans_under_their_traceparent() -> None:
    done = _python(
        """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from starlette.applications import Starlette
        from starlette.responses import PlainTextResponse
        from starlette.routing import Route
        from starlette.testclient import TestClient
        from dbos_agents.server.tracing import TracingMiddleware
        from dbos_agents.traces import capture

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        seen = []
        def hello(request):
            seen.append(capture())
            return PlainTextResponse("hi")
        app = Starlette(routes=[Route("/sessions/{sid}", hello)])
        app.add_middleware(TracingMiddleware)
        http = TestClient(app)
        tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
        http.get("/sessions/a", headers={"traceparent": tp})
        http.get("/sessions/b", headers={"traceparent": "00-garbage"})
        one, two = exporter.get_finished_spans()
        assert one.name == "GET /sessions/{sid}", one.name
        assert one.kind.name == "SERVER"
        assert format(one.context.trace_id, "032x") == "0af7651916cd43dd8448eb211c80319c"
        assert format(one.parent.span_id, "016x") == "b7ad6b7169203331"
        assert one.attributes["http.response.status_code"] == 200
        assert two.parent is None  # the malformed traceparent is ignored: a new trace
        assert seen[0]["traceparent"].split("-")[2] == format(one.context.span_id, "016x")
        print("ok")
        """
    )
    assert done.stdout.strip() == "ok", done.stderr


def test_capture_costs_nothing_measurable_without_a_span() -> None:
    started = time.perf_counter()
    for _ in range(10_000):
        assert traces.capture() is None
    assert time.perf_counter() - started < 0.5


def test_message_content_only_when_asked() -> None:
    code = """
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        from dbos_agents.traces import spans

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        with spans.run(agent="a", session_id="s", run_seq=1, carrier=None, resumed=False):
            with spans.chat(model="m", provider="p", session_id="s", turn=1,
                            messages=[{"role": "user", "content": "secret"}]) as chat:
                spans.chat_ended(chat, provider="p", response_model="m", tokens=(1, 2),
                                 cost_usd=0.0, finish_reason="stop", output={"text": "hi"})
        (chat,) = [s for s in exporter.get_finished_spans() if s.name == "chat m"]
        print(sorted(k for k in chat.attributes if "messages" in k))
    """
    off = _python(code)
    assert off.stdout.strip() == "[]", off.stderr
    on = _python(code, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT="true")
    assert on.stdout.strip() == "['gen_ai.input.messages', 'gen_ai.output.messages']", on.stderr
