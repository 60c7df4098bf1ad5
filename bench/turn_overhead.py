"""ms per turn of the durable agent loop against raw-DBOS floors, in one process.

One turn is one model step plus one side-effecting tool call (ScriptedModel, no network);
the floors are raw DBOS workflows doing 2 steps, and 2 steps + 2 datasource transactions,
per turn, interleaved session by session with ours so drift hits every path equally.

    python bench/turn_overhead.py [--database-url URL] [--turns 20] [--sessions 10]
        [--pg-sessions 10] [--json]
    python bench/turn_overhead.py --streaming --database-url URL [--sessions 20] [--rounds 3]
    python bench/turn_overhead.py --database-url URL --concurrent N [--model-ms L] [--sequential]

``--pg-sessions K``: ours' Postgres figures per turn from a window of K sessions
(bench/_lib/pgwatch.py; 0 skips it). ``--streaming``: streaming on against off
(bench/streaming.py's per-turn part). ``--concurrent N``: a window's child.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import psycopg
import sqlalchemy as sa
from _lib import cli, internals
from _lib.db import database_url
from _lib.labels import COMMITS, MIX, OURS, RAW
from _lib.pgwatch import per_turn_pg
from _lib.render import show, turn_rows, turn_table
from dbos import DBOS
from peers._common import add_concurrency_args, burst, p90

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, ToolContext, tool
from dbos_agents.models import ModelEvent, ModelRequest, ScriptedModel, call, calls

TURNS = 20  # set by --turns before the runtime launches; respond() reads it
STREAMED = False  # --streaming: each tool turn says a sentence, the answer ~200 characters
SAY, ANSWER = "Let me charge that order now. ", "All ten orders are charged. " * 7


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Charge an order (trivial; side-effecting, so run at most once)."""
    return {"charged": cents, "key": ctx.idempotency_key}


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < TURNS:
        return calls(
            call("charge", {"order_id": f"o{turn}", "cents": 100}), text=SAY if STREAMED else None
        )
    return ANSWER if STREAMED else "done"


@DBOS.step(name="bench.raw_model")
async def raw_model(i: int) -> dict[str, object]:
    return {"tool_calls": [{"name": "charge", "arguments": {"order_id": f"o{i}", "cents": 100}}]}


@DBOS.step(name="bench.raw_tool")
async def raw_tool(i: int) -> dict[str, object]:
    return {"charged": 100, "i": i}


_RAW_TX: list[Callable[[int], Awaitable[int]]] = []


@DBOS.workflow(name="bench.raw_mix")
async def raw_mix(turns: int) -> int:
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


def runtime(url: str, model: Any = None, **settings: Any) -> AgentRuntime:
    return AgentRuntime(
        [Agent("bench", tools=[charge], max_turns=TURNS + 1)],
        model or ScriptedModel(respond=respond),
        settings=Settings(database_url=url, log_level="ERROR", **settings),
    )


async def ours(rt: AgentRuntime, prompt: str = "go") -> tuple[float, float, str]:
    """One session: (ms per model call, CPU ms per model call, session id)."""
    t0, c0 = time.perf_counter(), time.process_time()
    h = await rt.start("bench", prompt)
    out = await h.result()
    assert out.status == "completed" and out.turns == TURNS + 1, out
    per = (TURNS + 1) / 1000
    return (time.perf_counter() - t0) / per, (time.process_time() - c0) / per, h.session_id


async def raw(workflow: Any) -> float:
    t0 = time.perf_counter()
    await (await DBOS.start_workflow_async(workflow, TURNS)).get_result()
    return (time.perf_counter() - t0) * 1000 / TURNS


async def commits(conn: psycopg.AsyncConnection[Any]) -> float:
    """``COMMITS``: ms per turn of three single-row commits in sequence, each waiting for
    its WAL flush, as a turn's record, dispatch mark and result do."""
    t0 = time.perf_counter()
    for i in range(TURNS):
        await conn.execute("INSERT INTO bench_commits (turn) VALUES (%s)", (i,), prepare=True)
        for _ in range(2):
            await conn.execute(
                "UPDATE bench_commits SET n = n + 1 WHERE turn = %s", (i,), prepare=True
            )
    await conn.execute("TRUNCATE bench_commits")
    return (time.perf_counter() - t0) * 1000 / TURNS


async def run(url: str, sessions: int) -> tuple[dict[str, list[float]], list[float]]:
    """Per-session ms per turn of each path (RAW, MIX, OURS), and ours' CPU ms per turn."""
    # Replies not streamed: the peers this row is compared with do not stream theirs.
    rt = runtime(url, executor_id="bench", stream_replies=False)
    await rt.launch()
    _RAW_TX.append(internals.raw_datasource_tx())
    await ours(rt, "warm")
    await raw(raw_loop)
    await raw(raw_mix)
    samples: dict[str, list[float]] = {RAW: [], MIX: [], OURS: [], COMMITS: []}
    cpu: list[float] = []
    conn = await psycopg.AsyncConnection.connect(
        sa.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False),
        autocommit=True,
    )
    await conn.execute("CREATE TABLE IF NOT EXISTS bench_commits (turn int, n int DEFAULT 0)")
    await commits(conn)
    for _ in range(sessions):
        samples[RAW].append(await raw(raw_loop))
        samples[MIX].append(await raw(raw_mix))
        samples[COMMITS].append(await commits(conn))
        ms, cpu_ms, _ = await ours(rt)
        samples[OURS].append(ms)
        cpu.append(cpu_ms)
    await conn.close()
    await rt.shutdown()
    return samples, cpu


async def streaming(url: str, sessions: int, rounds: int) -> dict[str, Any]:
    """Streaming on against off, alternated: medians of the rounds' medians, and per streamed
    turn the delta rows and the announcer's batches."""
    rt = runtime(url, ScriptedModel(respond=respond, chunk_chars=8), executor_id="bench-stream")
    await rt.launch()
    announcer = internals.announcer()
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    medians: dict[bool, list[float]] = {True: [], False: []}
    rows = batches = streamed = 0
    try:
        for on in (True, False):  # warm-up
            rt.settings.stream_replies = on
            await ours(rt)
        for r in range(rounds):
            ms: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(sessions):
                for on in (True, False) if r % 2 == 0 else (False, True):
                    rt.settings.stream_replies = on
                    f0 = announcer.flushes
                    per_turn, _, sid = await ours(rt)
                    ms[on].append(per_turn)
                    if on:
                        batches += announcer.flushes - f0
                        streamed += TURNS + 1
                        with engine.connect() as conn:
                            sql = "SELECT count(*) FROM dbos_agents.deltas WHERE session_id = :s"
                            rows += conn.execute(sa.text(sql), {"s": sid}).scalar_one()
            for on in (True, False):
                medians[on].append(statistics.median(ms[on]))
    finally:
        engine.dispose()
        await rt.shutdown()
    return {
        "on_ms": round(statistics.median(medians[True]), 3),
        "off_ms": round(statistics.median(medians[False]), 3),
        "rounds_on_ms": [round(x, 3) for x in medians[True]],
        "rounds_off_ms": [round(x, 3) for x in medians[False]],
        "rows_per_turn": round(rows / streamed, 2),
        "batches_per_turn": round(batches / streamed, 2),
        "turns": TURNS,
        "sessions": sessions,
    }


class SleepingModel:
    """``respond``'s turns, each after ``sleep_ms`` of ``asyncio.sleep`` (like a network
    call; set after the warm-up)."""

    name = "scripted-sleeping"

    def __init__(self) -> None:
        self.sleep_ms = 0.0
        self._inner = ScriptedModel(respond=respond, name=self.name, chunk_chars=8)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.sleep_ms:
            await asyncio.sleep(self.sleep_ms / 1000)
        return await self._inner.complete(request)


class StreamingSleepingModel(SleepingModel):
    """``SleepingModel`` that streams its replies in 8-character pieces (``--streaming``)."""

    continues = False

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if self.sleep_ms:
            await asyncio.sleep(self.sleep_ms / 1000)
        async for event in self._inner.stream(request):
            yield event


async def window(url: str, sessions: int, model_ms: float, sequential: bool) -> None:
    """A window's child: sessions started with ``runtime.start`` and awaited in the worker,
    as the peers start theirs in their own processes."""
    model = StreamingSleepingModel() if STREAMED else SleepingModel()
    rt = runtime(url, model, executor_id="bench-concurrency", stream_replies=STREAMED)
    await rt.launch()

    async def one(i: int) -> int:
        out = await (await rt.start("bench", f"go {i}")).result()
        if out.status != "completed" or out.turns != TURNS + 1:
            raise RuntimeError(f"session {i}: {out.status}, {out.turns} turns ({out.error})")
        return TURNS

    try:
        # Warm-up, no model latency: as many sessions at once as the window runs (up to
        # the pools' size), so the window opens no connection, as the peers' pools are
        # open before theirs (a new backend costs Postgres milliseconds of CPU).
        await asyncio.gather(*(one(-1 - i) for i in range(1 if sequential else min(sessions, 50))))
        model.sleep_ms = model_ms
        how = "one after another" if sequential else "at once"
        await burst(
            sessions,
            one,
            sequential,
            measures=f"runtime.start -> handle.result() x {sessions} {how}, in the worker",
            versions=cli.versions(),
        )
    finally:
        await rt.shutdown()


def as_json(samples: dict[str, list[float]], cpu: list[float], sessions: int) -> dict[str, Any]:
    """Rows shaped like bench/peers/_common.emit's, plus the samples."""
    divisors = {RAW: TURNS, MIX: TURNS, OURS: TURNS + 1, COMMITS: TURNS}
    return {
        "sessions": sessions,
        "turns": TURNS,
        "versions": cli.versions(),
        "ours_cpu_ms_per_turn_median": round(statistics.median(cpu), 3),
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


def streamed_pg(url: str, sessions: int, rounds: int) -> dict[str, Any]:
    """Postgres per model call of a plain and a streamed turn, in alternated windows
    (medians), and what streaming adds over a plain turn's Postgres CPU."""
    db = f"{sa.make_url(url).database}_pg"
    runs: dict[str, list[dict[str, Any]]] = {"ours": [], "ours_streamed": []}
    for r in range(rounds):
        for system in list(runs) if r % 2 == 0 else list(runs)[::-1]:
            runs[system].append(per_turn_pg(url, db, system, sessions, TURNS))
    out = {
        s: {k: statistics.median(w[k] for w in ws) for k in ws[0] if isinstance(ws[0][k], float)}
        for s, ws in runs.items()
    }
    plain, streamed = (out[s]["pg_cpu_ms_per_turn"] for s in ("ours", "ours_streamed"))
    return {**out, "extra_pg_cpu_over_plain": round((streamed - plain) / plain, 3)}


def print_table(result: dict[str, Any]) -> None:
    ms = {r["system"]: r["ms_per_turn_median"] for r in result["rows"]}
    show([f"ms per turn, {result['sessions']} sessions x {TURNS} turns; ours / the same mix:"
          f" {ms[OURS] / ms[MIX]:.2f}", "", turn_table(turn_rows({"turn_overhead": result, "peers": []}))])  # fmt: skip


def main() -> None:
    global TURNS, STREAMED
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, sessions=10, pg_sessions=10, rounds=3)
    p.add_argument("--turns", type=int, default=TURNS, help="tool-calling turns per session")
    p.add_argument("--streaming", action="store_true", help="streaming on against off")
    p.add_argument("--json", action="store_true", help="one JSON line on stdout")
    add_concurrency_args(p)
    args = p.parse_args()
    TURNS = args.turns
    STREAMED = args.streaming
    if args.concurrent:
        asyncio.run(window(args.database_url, args.concurrent, args.model_ms, args.sequential))
        return
    url = database_url(args.database_url, "dbos_agents_bench")
    if args.streaming:
        result = asyncio.run(streaming(url, args.sessions, args.rounds))
        if args.pg_sessions:
            result["pg"] = streamed_pg(url, args.pg_sessions, args.rounds)
        cli.print_json(result)
        return
    samples, cpu = asyncio.run(run(url, args.sessions))
    result = as_json(samples, cpu, args.sessions)
    if args.pg_sessions:
        db = f"{sa.make_url(url).database}_pg"
        row = next(r for r in result["rows"] if r["system"] == OURS)
        row["pg"] = per_turn_pg(url, db, "ours", args.pg_sessions, TURNS)
    with cli.report_to_stderr(args.json):
        print_table(result)
    if args.json:
        cli.print_json(result)


if __name__ == "__main__":
    main()
