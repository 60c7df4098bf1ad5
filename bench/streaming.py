"""Live streams: the latency from a piece leaving the model adapter to an SSE reader, and what
streaming costs per turn (on against off, and against LangGraph streaming its messages).

A stream is what a user watches, so its latency is timed end to end across real processes
(the worker and ``dbos-agents serve`` of bench/_lib/live.py, and this process's readers),
and against floors that show what the host and the SSE stack cost without us (``--floor-serve
local|notify``, ``--floor-produce``: this script as the floor's server and producer). Method
and findings: docs/bench-notes/streaming.md.

    python bench/streaming.py [--streams 1,200] [--pieces 40] [--pace-ms 50]
        [--sessions 20] [--turns 10] [--rounds 3] [--peers] [--json] [--server-url URL]
        [--server-workers 1] [--latency-rounds 1] [--no-floors] [--latency-only]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import uvicorn
from _lib import cli, sse_reader
from _lib.child import Child
from _lib.db import LOCAL_SERVER
from _lib.live import processes, stamps, worker_args
from _lib.procfs import Meter
from _lib.render import show, streaming_section
from _lib.stats import pct
from rich.console import Console
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route

from dbos_agents import Settings
from dbos_agents.testing import create_fresh_database, drop_database
from dbos_agents.testing.cluster import free_port

HERE = Path(__file__).resolve().parent
PEER_PY = HERE / "peers" / ".venv" / "bin" / "python"


async def _read(base: str, path: str, token: str, out: list[float]) -> tuple[int, float]:
    """Follow one stream until its run ends: the latency of each piece (ms) into ``out``;
    the number of pieces and the first one's stamp."""
    pieces, first = 0, 0.0

    def on_event(kind: str, data: bytes, now: float) -> bool:
        nonlocal pieces, first
        if kind == "delta":
            for stamp in stamps(json.loads(data)["text"]):
                out.append((now - stamp) * 1000)
                first = first or stamp
                pieces += 1
        return kind == "status"

    url = httpx.URL(base)
    headers = {"Authorization": f"Bearer {token}"}
    await sse_reader.follow(url.host, url.port or 80, path, headers, on_event)
    return pieces, first


def _figures(n: int, pieces: int, got: list[tuple[int, float]], out: list[float]) -> dict[str, Any]:
    firsts = [f for _, f in got if f]
    return {
        "streams": n,
        "pieces": len(out),
        "sessions_with_wrong_count": sum(1 for g, _ in got if g != pieces),
        "p50_ms": round(pct(out, 50), 2),
        "p90_ms": round(pct(out, 90), 2),
        "p99_ms": round(pct(out, 99), 2),
        "max_ms": round(max(out), 2),
        "ramp_ms": round((max(firsts) - min(firsts)) * 1000) if firsts else 0,
    }


async def latency_round(base: str, n: int) -> tuple[list[tuple[int, float]], list[float]]:
    """One round of ``n`` sessions: each stream's (pieces, first stamp) and every piece's
    latency (ms)."""
    # No keep-alive: a POST's connection idle past uvicorn's 5 s keep-alive is closed under it.
    limits = httpx.Limits(max_connections=2 * n + 10, max_keepalive_connections=0)
    async with httpx.AsyncClient(timeout=httpx.Timeout(120.0), limits=limits) as http:

        async def one(i: int, out: list[float]) -> tuple[int, float]:
            r = await http.post(f"{base}/sessions", json={"agent": "stamp", "message": str(i)})
            r.raise_for_status()
            sid, token = r.json()["session_id"], r.json()["token"]
            return await _read(base, f"/sessions/{sid}/events", token, out)

        out: list[float] = []
        got = await asyncio.gather(*(one(i, out) for i in range(n)))
    return list(got), out


def pooled(
    n: int, pieces: int, rounds: list[tuple[list[tuple[int, float]], list[float]]]
) -> dict[str, Any]:
    """The figures of ``rounds`` of ``n`` streams, their pieces pooled (one round's p99 is
    one draw of a wide spread); each round's p99 and the widest start spread kept."""
    each = [_figures(n, pieces, got, out) for got, out in rounds]
    row = _figures(
        n, pieces, [g for got, _ in rounds for g in got], [x for _, out in rounds for x in out]
    )
    row["ramp_ms"] = max(r["ramp_ms"] for r in each)
    row["rounds"] = len(rounds)
    row["round_p99_ms"] = [r["p99_ms"] for r in each]
    return row


def latency(
    server_url: str,
    streams: list[int],
    pieces: int,
    pace_ms: float,
    server_workers: int = 1,
    rounds: int = 1,
) -> list[dict[str, Any]]:
    """Each N in ``streams``, ``rounds`` times on one worker and server; CPU per round."""
    name = "dbos_agents_bench_streaming"
    live = worker_args(pieces, pace_ms, lead_ms=3000, jitter_ms=0)
    with processes(server_url, name, live, server_workers) as (base, worker, server_pid):
        rows = []
        for n in streams:
            # the server with its --workers; the readers' process is the parent of the rest
            pids = {"worker": worker.pid, "server": server_pid, "readers": os.getpid()}
            meter = Meter(pids, name, tree=("server",))
            row = pooled(n, pieces, [asyncio.run(latency_round(base, n)) for _ in range(rounds)])
            row |= meter.read(per=rounds)
            row["profiled"] = False
            row["server_workers"] = server_workers
            rows.append(row)
        return rows


def _wait_for_port(port: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


FLOORS = {"local": "floor: SSE stack only", "notify": "floor: + pg_notify from a producer"}


def floor(
    server_url: str, mode: str, n: int, pieces: int, pace_ms: float, ramp_ms: float
) -> dict[str, Any]:
    """The floor ``mode`` with ``n`` streams started over ``ramp_ms`` (as
    our own sessions started in the round before), read by the same readers."""
    name = "dbos_agents_bench_floor"
    url = create_fresh_database(server_url, name) if mode == "notify" else None
    script = str(Path(__file__).resolve())
    common = ["--streams", str(n), "--pieces", str(pieces), "--pace-ms", str(pace_ms)]
    offsets = [i * ramp_ms / max(1, n - 1) for i in range(n)]
    port = free_port()
    db = ["--database-url", url] if url else []
    producer = None
    if url:
        spread = ",".join(f"{o:.1f}" for o in offsets)
        producer = Child(
            [sys.executable, script, "--floor-produce", *db, *common, "--offsets-ms", spread]
        )
        producer.expect("READY", 60)
    cmd = [sys.executable, script, "--floor-serve", mode, "--port", str(port), *common, *db]
    server = subprocess.Popen(cmd)
    try:
        _wait_for_port(port)
        pids = {"server": server.pid, "readers": os.getpid()}
        meter = Meter({"worker": producer.pid, **pids} if producer else pids, name)
        base = f"http://127.0.0.1:{port}"

        async def run() -> list[tuple[int, float]]:
            paths = [f"/floor/{i}?offset={offsets[i] / 1000:.4f}" for i in range(n)]
            return await asyncio.gather(*(_read(base, path, "", out) for path in paths))

        out: list[float] = []
        row = {"worker_cpu_s": 0.0, **_figures(n, pieces, asyncio.run(run()), out), **meter.read()}
        row["profiled"] = False
        row["label"] = FLOORS[mode]
        return row
    finally:
        server.terminate()
        server.wait(30)
        if producer is not None:
            producer.proc.terminate()
            producer.proc.wait(30)
        if url:
            drop_database(server_url, name)


def per_turn(server_url: str, sessions: int, turns: int, rounds: int) -> dict[str, Any]:
    """ms per turn streaming on and off, and Postgres per plain and streamed turn
    (``turn_overhead.py --streaming --pg-sessions``)."""
    name = "dbos_agents_bench_streaming_turns"
    url = create_fresh_database(server_url, name)
    cmd = [sys.executable, str(HERE / "turn_overhead.py"), "--streaming", "--database-url", url]
    cmd += ["--sessions", str(sessions), "--turns", str(turns), "--rounds", str(rounds)]
    cmd += ["--pg-sessions", str(max(10, sessions))]
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    finally:
        drop_database(server_url, name)
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def peer(server_url: str, sessions: int, turns: int) -> dict[str, Any] | None:
    if not PEER_PY.exists():
        return None
    name = "dbos_agents_bench_lg_stream"
    url = create_fresh_database(server_url, name)
    try:
        cmd = [
            str(PEER_PY),
            str(HERE / "peers" / "langgraph_pg.py"),
            "--stream",
            "--database-url",
            url,
        ]
        cmd += ["--sessions", str(sessions), "--turns", str(turns)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=HERE / "peers")
        lines = [json.loads(x) for x in out.stdout.strip().splitlines() if x.startswith("{")]
        line: dict[str, Any] = next(x for x in lines if x["system"] == "langgraph_stream")
        return line
    finally:
        drop_database(server_url, name)


# ---------------------------------------------------------------------------- the floors

CHANNEL = "bench_floor"
GO = "bench_floor_go"


def _delta(stamp: str) -> ServerSentEvent:
    return ServerSentEvent(json.dumps({"text": stamp + ";"}), event="delta", sep="\n")


def _status() -> ServerSentEvent:
    return ServerSentEvent('{"status": "completed"}', event="status", sep="\n")


def app(mode: str, streams: int, pieces: int, pace: float, database_url: str | None) -> Starlette:
    queues: dict[int, asyncio.Queue[str]] = {}
    go = asyncio.Event()
    loop: asyncio.AbstractEventLoop | None = None

    def listen() -> None:
        assert database_url is not None
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute(f"LISTEN {CHANNEL}")
            for note in conn.notifies():
                i, _, stamp = note.payload.partition(":")
                q = queues.get(int(i))
                if q is not None and loop is not None:
                    loop.call_soon_threadsafe(q.put_nowait, stamp)

    async def connected() -> None:
        if len(queues) == streams and not go.is_set():
            go.set()
            if mode == "notify":
                assert database_url is not None
                async with await psycopg.AsyncConnection.connect(
                    database_url, autocommit=True
                ) as conn:
                    await conn.execute(f"NOTIFY {GO}")

    async def local(i: int, offset: float) -> AsyncIterator[ServerSentEvent]:
        await go.wait()
        await asyncio.sleep(offset)
        for k in range(pieces):
            if k:
                await asyncio.sleep(pace)
            yield _delta(f"{time.time():.6f}")
        yield _status()

    async def forwarded(q: asyncio.Queue[str]) -> AsyncIterator[ServerSentEvent]:
        while (stamp := await q.get()) != "end":
            yield _delta(stamp)
        yield _status()

    async def stream(request: Request) -> EventSourceResponse:
        nonlocal loop
        loop = asyncio.get_running_loop()
        i = int(request.path_params["i"])
        q: asyncio.Queue[str] = asyncio.Queue()
        queues[i] = q
        await connected()
        offset = float(request.query_params.get("offset", "0"))
        body = local(i, offset) if mode == "local" else forwarded(q)
        return EventSourceResponse(body, sep="\n")

    if mode == "notify":
        threading.Thread(target=listen, daemon=True).start()
    return Starlette(routes=[Route("/floor/{i}", stream)])


async def produce(
    database_url: str, offsets: list[float], pieces: int, pace: float, flush: float
) -> None:
    pending: list[str] = []
    done = 0

    async def one(i: int, offset: float) -> None:
        nonlocal done
        await asyncio.sleep(offset)
        for k in range(pieces):
            if k:
                await asyncio.sleep(pace)
            pending.append(f"{i}:{time.time():.6f}")
        pending.append(f"{i}:end")
        done += 1

    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as listen:
        await listen.execute(f"LISTEN {GO}")
        print("READY", flush=True)
        async for _ in listen.notifies(stop_after=1):
            break
    async with await psycopg.AsyncConnection.connect(database_url, autocommit=True) as conn:
        tasks = [asyncio.create_task(one(i, o)) for i, o in enumerate(offsets)]
        while done < len(offsets) or pending:
            await asyncio.sleep(flush)
            if pending:
                batch, pending[:] = list(pending), []
                await conn.execute(
                    "SELECT pg_notify(%s, p) FROM unnest(%s::text[]) p", (CHANNEL, batch)
                )
        await asyncio.gather(*tasks)


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument(
        "--server-url", default=os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", LOCAL_SERVER)
    )
    p.add_argument("--streams", default="1,200")
    p.add_argument("--peers", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--latency-only", action="store_true", help="skip the per-turn part")
    p.add_argument(
        "--server-workers", type=int, default=1, help="dbos-agents serve --workers (processes)"
    )
    p.add_argument("--no-floors", action="store_true", help="skip the floors of the largest N")
    p.add_argument(
        "--latency-rounds",
        type=int,
        default=1,
        help="rounds of each N, their pieces pooled (CPU per round)",
    )
    cli.options(p, pieces=40, pace_ms=50.0, sessions=20, turns=10, rounds=3)
    p.add_argument("--floor-serve", choices=list(FLOORS), help=argparse.SUPPRESS)
    p.add_argument("--floor-produce", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--offsets-ms", default="", help=argparse.SUPPRESS)
    p.add_argument("--database-url", help=argparse.SUPPRESS)
    flush_ms = Settings.model_fields["stream_flush_sec"].default * 1000
    cli.options(p, port=0, flush_ms=flush_ms)
    args = p.parse_args()
    streams = [int(x) for x in args.streams.split(",") if x]
    pace = args.pace_ms / 1000
    if args.floor_produce:
        offsets = [float(x) / 1000 for x in args.offsets_ms.split(",") if x]
        asyncio.run(produce(args.database_url, offsets, args.pieces, pace, args.flush_ms / 1000))
        return
    if args.floor_serve:
        served = app(args.floor_serve, streams[0], args.pieces, pace, args.database_url)
        uvicorn.run(served, host="127.0.0.1", port=args.port, log_level="warning")
        return
    with cli.report_to_stderr(args.json):
        console = Console()
        console.print(f"[streaming] latency: {streams} streams, {args.pieces} pieces each")
        lat = latency(
            args.server_url,
            streams,
            args.pieces,
            args.pace_ms,
            args.server_workers,
            args.latency_rounds,
        )
        if not args.no_floors:
            ours = lat[-1]
            for mode in FLOORS:
                lat.append(
                    floor(
                        args.server_url,
                        mode,
                        ours["streams"],
                        args.pieces,
                        args.pace_ms,
                        ours["ramp_ms"],
                    )
                )
        turns = None
        if not args.latency_only:
            console.print("[streaming] per turn: on/off alternated")
            turns = per_turn(args.server_url, args.sessions, args.turns, args.rounds)
            if args.peers:
                turns["langgraph_stream"] = peer(args.server_url, args.sessions, args.turns)
        show(streaming_section({"latency": lat, "per_turn": turns}), console)
    if args.json:
        cli.print_json({"latency": lat, "per_turn": turns, "versions": cli.versions()})


if __name__ == "__main__":
    main()
