"""Per-turn overhead of the durable agent loop against the raw-DBOS floor, in one run.

One "turn" is one model step plus one side-effecting tool call (ScriptedModel, no network).
The floor is a raw DBOS async workflow doing two async steps per iteration. Both loop K
times inside one workflow, so start/queue latency is amortized and the per-turn cost is
what is compared. The worker runs with default settings (a 0.2 s queue poll as the
safety net; starts are claimed on notification), as users run it.

    python bench/turn_overhead.py [--database-url URL] [--turns 20] [--sessions 10] [--json]
    python bench/turn_overhead.py --tracing on   # spans exported to a local OTLP receiver
    python bench/turn_overhead.py --tracing-ab 3  # rounds of off / on / a build without tracing
    python bench/turn_overhead.py --tracing alternate  # on and off in one process

Without --database-url it uses DBOS_AGENTS_DATABASE_URL, else the local server at
127.0.0.1:5432 (database dbos_agents_bench, recreated). ``--json`` prints one JSON line
(every path's per-session samples, median and p90, plus versions) instead of the table, so
bench/all.py can run this in its own process (DBOS is a process singleton) and plot the
distributions.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

from _lib import cli, internals
from _lib.db import database_url
from _lib.labels import MIX, OURS, RAW
from _lib.tables import rich_table
from dbos import DBOS
from peers._common import p90
from rich.console import Console

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, ToolContext, tool
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls

OURS_CPU_MS: list[float] = []
"""CPU ms per turn of the process (every thread: the span exporter's too) during ours."""
TURNS = 20  # set by --turns before the runtime launches; respond() reads it


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    return {"charged": cents, "key": ctx.idempotency_key}


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < TURNS:
        return calls(call("charge", {"order_id": f"o{turn}", "cents": 100}))
    return "done"


@DBOS.step(name="bench.raw_model")
async def raw_model(i: int) -> dict[str, object]:
    return {"tool_calls": [{"name": "charge", "arguments": {"order_id": f"o{i}", "cents": 100}}]}


@DBOS.step(name="bench.raw_tool")
async def raw_tool(i: int) -> dict[str, object]:
    return {"charged": 100, "i": i}


_RAW_TX: list[Callable[[int], Awaitable[int]]] = []


@DBOS.workflow(name="bench.raw_mix")
async def raw_mix(turns: int) -> int:
    """The design's irreducible mix per turn: 2 steps + 2 datasource transactions."""
    (tx,) = _RAW_TX
    for i in range(turns):
        await raw_model(i)
        await tx(i)
        await raw_tool(i)
        await tx(i)
    return turns


@DBOS.workflow(name="bench.raw_loop")
async def raw_loop(turns: int) -> int:
    for i in range(turns):
        await raw_model(i)
        await raw_tool(i)
    return turns


async def run(url: str, sessions: int) -> dict[str, list[float]]:
    """Per-session ms per turn of each path, keyed by path label (RAW, MIX, OURS)."""
    # Replies not streamed: the peers this row is compared with do not stream theirs.
    # Streaming's own cost, and ours against LangGraph both streaming: bench/streaming.py.
    settings = Settings(
        database_url=url, executor_id="bench", log_level="ERROR", stream_replies=False
    )
    rt = AgentRuntime(
        [Agent("bench", tools=[charge], max_turns=TURNS + 1)],
        ScriptedModel(respond=respond),
        settings=settings,
    )
    await rt.launch()
    _RAW_TX.append(internals.raw_datasource_tx())
    # Warm up both paths.
    await (await rt.start("bench", "warm")).result()
    await (await DBOS.start_workflow_async(raw_loop, TURNS)).get_result()

    await (await DBOS.start_workflow_async(raw_mix, TURNS)).get_result()

    raw_ms: list[float] = []
    mix_ms: list[float] = []
    ours_ms: list[float] = []
    for _ in range(sessions):  # interleave so drift hits all paths equally
        t0 = time.perf_counter()
        await (await DBOS.start_workflow_async(raw_loop, TURNS)).get_result()
        raw_ms.append((time.perf_counter() - t0) * 1000 / TURNS)
        t0 = time.perf_counter()
        await (await DBOS.start_workflow_async(raw_mix, TURNS)).get_result()
        mix_ms.append((time.perf_counter() - t0) * 1000 / TURNS)
        t0, c0 = time.perf_counter(), time.process_time()
        out = await (await rt.start("bench", "go")).result()
        ours_ms.append((time.perf_counter() - t0) * 1000 / (TURNS + 1))
        OURS_CPU_MS.append((time.process_time() - c0) * 1000 / (TURNS + 1))
        assert out.status == "completed" and out.turns == TURNS + 1, out
    await rt.shutdown()
    return {RAW: raw_ms, MIX: mix_ms, OURS: ours_ms}


async def run_alternating(url: str, sessions: int) -> dict[str, list[float]]:
    """Ours with spans on and off in one process, session by session in alternating order
    (``--tracing alternate``): the exporter to the local receiver stays up, and "off" makes
    the loop's spans see no tracer, as with nothing configured. One process, so the
    comparison is free of the between-process spread of the ``--tracing-ab`` rounds."""
    import dbos_agents.loop.spans as loop_spans
    import dbos_agents.traces.spans as trace_spans
    from dbos_agents.traces import tracer

    settings = Settings(
        database_url=url, executor_id="bench", log_level="ERROR", stream_replies=False
    )
    rt = AgentRuntime(
        [Agent("bench", tools=[charge], max_turns=TURNS + 1)],
        ScriptedModel(respond=respond),
        settings=settings,
    )
    await rt.launch()
    real = tracer()
    assert real is not None, "--tracing alternate needs tracing configured (it sets it up)"
    await (await rt.start("bench", "warm")).result()
    wall: dict[str, list[float]] = {"on": [], "off": []}
    cpu: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(2 * sessions):
        mode = ("on", "off")[(i + i // 2) % 2]  # on off off on on off ...
        found = (lambda: real) if mode == "on" else (lambda: None)
        loop_spans.tracer = trace_spans.tracer = found  # type: ignore[assignment]
        t0, c0 = time.perf_counter(), time.process_time()
        out = await (await rt.start("bench", "go")).result()
        wall[mode].append((time.perf_counter() - t0) * 1000 / (TURNS + 1))
        cpu[mode].append((time.process_time() - c0) * 1000 / (TURNS + 1))
        assert out.status == "completed", out
    await rt.shutdown()
    return {f"{k} {m}": v for k, d in (("ms", wall), ("cpu ms", cpu)) for m, v in d.items()}


def print_alternating(samples: dict[str, list[float]]) -> None:
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"ours, ms per turn (median of {len(samples['ms on'])} sessions each, one process):")
    for kind in ("ms", "cpu ms"):
        on, off = med[f"{kind} on"], med[f"{kind} off"]
        print(f"  {kind:>6}: on {on:.3f}  off {off:.3f}  ratio on/off {on / off:.3f}")


def print_table(samples: dict[str, list[float]], sessions: int) -> None:
    """The human-readable report (the default output)."""
    raw_ms, mix_ms, ours_ms = samples[RAW], samples[MIX], samples[OURS]
    raw, mix, ours = (statistics.median(x) for x in (raw_ms, mix_ms, ours_ms))
    table = rich_table(
        f"ms per turn (median of {sessions} sessions x {TURNS} turns)",
        ("path", "median", "min", "max"),
    )
    table.add_row(RAW, f"{raw:.2f}", f"{min(raw_ms):.2f}", f"{max(raw_ms):.2f}")
    table.add_row(
        MIX,
        f"{mix:.2f}",
        f"{min(mix_ms):.2f}",
        f"{max(mix_ms):.2f}",
    )
    table.add_row(
        OURS,
        f"{ours:.2f}",
        f"{min(ours_ms):.2f}",
        f"{max(ours_ms):.2f}",
    )
    Console().print(table)
    print(f"ratio {ours / raw:.2f}  (against 2 raw steps, the issue's floor)")
    print(f"ratio vs same-mix floor {ours / mix:.2f}  (our own code on top of DBOS)")


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, sessions=10)
    p.add_argument("--turns", type=int, default=TURNS, help="tool-calling turns per session")
    p.add_argument(
        "--json", action="store_true", help="print one JSON line with the samples instead"
    )
    p.add_argument("--tracing", choices=("off", "on", "alternate"), default="off")
    p.add_argument("--tracing-ab", type=int, default=0, metavar="ROUNDS")
    p.add_argument("--base", default="/tmp/ab-base", help="a checkout without tracing code")
    args = p.parse_args()
    if args.tracing_ab:
        tracing_ab(args)
        return
    sink = _traced() if args.tracing != "off" else None
    _set_turns(args.turns)
    url = database_url(args.database_url, "dbos_agents_bench")
    if args.tracing == "alternate":
        print_alternating(asyncio.run(run_alternating(url, args.sessions)))
        return
    samples = asyncio.run(run(url, args.sessions))
    if sink is not None:
        import urllib.request

        from opentelemetry import trace

        during = urllib.request.urlopen(sink).read().decode()
        trace.get_tracer_provider().force_flush()  # type: ignore[attr-defined]
        total = urllib.request.urlopen(sink).read().decode()
        print(f"OTLP batches received: {during} during the run, {total} in all", file=sys.stderr)
    if args.json:
        cli.print_json(as_json(samples, args.sessions))
    else:
        print_table(samples, args.sessions)


_SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Sink(BaseHTTPRequestHandler):
    received = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        Sink.received += 1
        self.send_response(200)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self):  # how many batches came
        body = str(Sink.received).encode()
        self.send_response(200)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def _traced() -> str:
    """Spans on: the standard variables point the exporter at a local OTLP receiver (a
    process of its own that accepts every batch, so its CPU is not counted as ours), read
    at the first span. Returns the receiver's address."""
    import atexit
    import os
    import subprocess

    sink = subprocess.Popen([sys.executable, "-c", _SINK], stdout=subprocess.PIPE, text=True)
    atexit.register(sink.kill)
    assert sink.stdout is not None
    url = f"http://127.0.0.1:{sink.stdout.readline().strip()}"
    os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = url
    os.environ.setdefault("OTEL_SERVICE_NAME", "bench-turn-overhead")
    os.environ.setdefault("OTEL_BSP_SCHEDULE_DELAY", "200")  # exports during the run, not after
    return url


def tracing_ab(args: Any) -> None:
    """Rounds of three processes in a rotating order: tracing off, tracing on, and this
    script on ``--base`` (a checkout without tracing code, first on PYTHONPATH); prints each
    round's medians of ms per turn and the ratios on/off and off/base."""
    import json
    import os
    import resource
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    variants = {
        "off": ([sys.executable, __file__, "--tracing", "off"], env),
        "on": ([sys.executable, __file__, "--tracing", "on"], env),
        "base": ([sys.executable, __file__], {**env, "PYTHONPATH": args.base}),
    }
    common = ["--json", "--sessions", str(args.sessions), "--turns", str(args.turns)]
    if args.database_url:
        common += ["--database-url", args.database_url]
    medians: dict[str, list[float]] = {k: [] for k in variants}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    turn_cpu: dict[str, list[float]] = {k: [] for k in variants}
    order = list(variants)
    for r in range(args.tracing_ab):
        for name in order[r % 3 :] + order[: r % 3]:
            cmd, penv = variants[name]
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            out = subprocess.run(
                cmd + common, env=penv, cwd="/", capture_output=True, text=True, check=True
            )
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            result = json.loads(out.stdout.strip().splitlines()[-1])
            row = next(x for x in result["rows"] if x["system"] == OURS)
            medians[name].append(row["ms_per_turn_median"])
            cpu[name].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            turn_cpu[name].append(result["ours_cpu_ms_per_turn_median"])
        print(
            f"round {r + 1}: off {medians['off'][-1]:.2f}  on {medians['on'][-1]:.2f}  "
            f"base {medians['base'][-1]:.2f} ms/turn; CPU ms/turn: off {turn_cpu['off'][-1]:.2f}"
            f"  on {turn_cpu['on'][-1]:.2f}  base {turn_cpu['base'][-1]:.2f}",
            flush=True,
        )
    off, on, base = (statistics.median(medians[k]) for k in ("off", "on", "base"))
    print(f"median ms per turn: off {off:.2f}  on {on:.2f}  base (no tracing code) {base:.2f}")
    print(f"ratio on/off {on / off:.3f}  (goal <= 1.10)")
    print(f"ratio off/base {off / base:.3f}  (goal: within the noise)")
    spread = [max(v) / min(v) for v in medians.values()]
    print(f"round-to-round spread (max/min of a variant): {max(spread):.3f}")
    # CPU is steadier than wall time on a shared host (every thread's, the exporter's too).
    t_off, t_on, t_base = (statistics.median(turn_cpu[k]) for k in ("off", "on", "base"))
    print(f"median CPU ms per turn: off {t_off:.2f}  on {t_on:.2f}  base {t_base:.2f}")
    print(f"CPU ratio on/off {t_on / t_off:.3f}  off/base {t_off / t_base:.3f}")
    c_off, c_on, c_base = (statistics.median(cpu[k]) for k in ("off", "on", "base"))
    print(f"median CPU s of a whole process: off {c_off:.2f}  on {c_on:.2f}  base {c_base:.2f}")


def _set_turns(turns: int) -> None:
    """respond() and the raw workflows read the module-level TURNS."""
    global TURNS
    TURNS = turns


def as_json(samples: dict[str, list[float]], sessions: int) -> dict[str, Any]:
    """One result object: rows shaped like bench/peers/_common.emit's, plus the samples."""
    divisors = {RAW: TURNS, MIX: TURNS, OURS: TURNS + 1}
    return {
        "sessions": sessions,
        "turns": TURNS,
        "versions": cli.versions(),
        "ours_cpu_ms_per_turn_median": round(statistics.median(OURS_CPU_MS), 3),
        "rows": [
            {
                "system": label,
                "ms_per_turn_median": round(statistics.median(xs), 3),
                "ms_per_turn_p90": round(p90(xs), 3),
                "ms_per_turn_min": round(min(xs), 3),
                "ms_per_turn_max": round(max(xs), 3),
                "samples_ms_per_turn": [round(x, 3) for x in xs],
                "divisor": divisors[label],
                "floor": label == RAW,
            }
            for label, xs in samples.items()
        ],
    }


if __name__ == "__main__":
    main()
