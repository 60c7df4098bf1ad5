"""The per-turn part of bench/streaming.py, in a process of its own (DBOS is a process
singleton): sequential sessions of ``--turns`` tool turns and an answer, ``ScriptedModel``
streaming 8-character pieces with no model latency, sessions alternating between
``stream_replies`` on and off within each round (the order flips every round).

Prints one JSON line: the medians of the rounds' median ms per turn for each mode, and for
the streamed turns the delta rows and the announcer's batches per turn.

    python bench/streaming_turns.py --server-url URL [--sessions 20] [--turns 10] [--rounds 3]
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time

import sqlalchemy as sa
from _lib import cli

from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, ToolContext, tool
from dbos_agents.loop.context import get_context
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from dbos_agents.testing import create_fresh_database, drop_database

AGENT = "bench"
TURNS = 10
ANSWER = "All ten orders are charged. " * 7  # about 200 characters


@tool
async def charge(ctx: ToolContext, order_id: str, cents: int) -> dict[str, object]:
    """Charge an order (trivial; side-effecting, so run at most once)."""
    return {"charged": cents, "key": ctx.idempotency_key}


def respond(request: ModelRequest) -> str | ModelResponse:
    turn = sum(1 for m in request.messages if m.role == "assistant")
    if turn < TURNS:
        return calls(
            call("charge", {"order_id": f"o{turn}", "cents": 100}),
            text="Let me charge that order now. ",
        )
    return ANSWER


async def session(rt: AgentRuntime) -> tuple[float, str]:
    t0 = time.perf_counter()
    h = await rt.start(AGENT, "charge them")
    out = await h.result()
    assert out.status == "completed", out
    return (time.perf_counter() - t0) * 1000 / (TURNS + 1), h.session_id


async def run(url: str, sessions: int, rounds: int) -> dict[str, object]:
    rt = AgentRuntime(
        [Agent(AGENT, tools=[charge])],
        ScriptedModel(respond=respond, chunk_chars=8),
        settings=Settings(database_url=url, executor_id="bench-streaming-turns"),
    )
    await rt.launch()
    announcer = get_context().ledger.announcer
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    medians: dict[bool, list[float]] = {True: [], False: []}
    rows = batches = streamed_turns = 0
    try:
        for on in (True, False):  # warm-up
            rt.settings.stream_replies = on
            await session(rt)
        for r in range(rounds):
            order = (True, False) if r % 2 == 0 else (False, True)
            ms: dict[bool, list[float]] = {True: [], False: []}
            for _ in range(sessions):
                for on in order:
                    rt.settings.stream_replies = on
                    f0 = announcer.flushes
                    per_turn, sid = await session(rt)
                    ms[on].append(per_turn)
                    if on:
                        batches += announcer.flushes - f0
                        streamed_turns += TURNS + 1
                        with engine.connect() as conn:
                            rows += conn.execute(
                                sa.text(
                                    "SELECT count(*) FROM dbos_agents.deltas WHERE session_id = :s"
                                ),
                                {"s": sid},
                            ).scalar_one()
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
        "rows_per_turn": round(rows / streamed_turns, 2),
        "batches_per_turn": round(batches / streamed_turns, 2),
        "turns": TURNS,
        "sessions": sessions,
    }


def main() -> None:
    global TURNS
    p = cli.parser(__doc__)
    p.add_argument("--server-url", required=True)
    cli.options(p, sessions=20, turns=10, rounds=3)
    args = p.parse_args()
    TURNS = args.turns
    name = "dbos_agents_bench_streaming_turns"
    url = create_fresh_database(args.server_url, name)
    try:
        print(json.dumps(asyncio.run(run(url, args.sessions, args.rounds))), flush=True)
    finally:
        drop_database(args.server_url, name)


if __name__ == "__main__":
    main()
