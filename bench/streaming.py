"""Live streams: the latency from a piece leaving the model adapter to an SSE reader, and
what streaming costs per turn (on against off, and against LangGraph streaming its
messages), in one run.

1. **Latency.** A worker (bench/streaming_worker.py: each piece stamped with the time it
   leaves the adapter), ``dbos-agents serve`` and this process (the readers) run apart on
   one database. For each N in ``--streams``, N sessions start at once over HTTP and N
   readers follow ``GET /sessions/{id}/events`` (``_lib/sse_reader``: a socket each, so the
   readers take half the CPU httpx took from the cores the server shares); each piece's
   latency is the reader's clock at arrival minus its stamp. Every piece must arrive exactly
   once.
2. **Per turn.** One in-process runtime plays sequential sessions of ``--turns`` tool turns
   and an answer with ``ScriptedModel`` streaming 8-character pieces (no model latency: the
   worst case for the overhead), alternating sessions with ``stream_replies`` on and off;
   ms per turn, delta rows and batches per streamed turn. With ``--peers`` (bench/peers/.venv)
   LangGraph + AsyncPostgresSaver runs the same conversation streaming its tokens
   (``stream_mode="messages"``, bench/peers/langgraph_stream.py).

    python bench/streaming.py [--streams 1,200] [--pieces 40] [--pace-ms 50]
        [--sessions 20] [--turns 10] [--rounds 3] [--peers] [--json] [--server-url URL]
        [--server-workers 1] [--latency-rounds 1]
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
from _lib import cli, pyspy, sse_reader
from _lib.child import Child
from _lib.db import LOCAL_SERVER
from _lib.procfs import backend_cpu_seconds, cpu_seconds, host_busy_pct, host_cpu, tree_cpu_seconds
from _lib.serve import wait_healthy
from _lib.stats import pct
from rich.console import Console

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
            for stamp in json.loads(data)["text"].split(";"):
                if stamp:
                    out.append((now - float(stamp)) * 1000)
                    first = first or float(stamp)
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


def _cpu(who: str, pid: int) -> float:
    """The server's processes (``--workers``) together; the others alone (the readers'
    process is the parent of the rest)."""
    return tree_cpu_seconds(pid) if who == "server" else cpu_seconds(pid)


def latency(
    server_url: str,
    streams: list[int],
    pieces: int,
    pace_ms: float,
    profile: Path | None = None,
    server_workers: int = 1,
    rounds: int = 1,
) -> list[dict[str, Any]]:
    """Each N in ``streams``, ``rounds`` times on one worker and server; CPU per round."""
    name = "dbos_agents_bench_streaming"
    url = create_fresh_database(server_url, name)
    env = {**os.environ, "DBOS_AGENTS_DATABASE_URL": url}
    port = free_port()
    worker = Child(
        [
            sys.executable,
            str(HERE / "streaming_worker.py"),
            "--database-url",
            url,
            "--pieces",
            str(pieces),
            "--pace-ms",
            str(pace_ms),
        ],
        env=env,
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dbos_agents.cli",
            "serve",
            "--allow-unauthenticated",
            "--port",
            str(port),
            "--database-url",
            url,
            "--workers",
            str(server_workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "w"),  # noqa: SIM115
    )
    base = f"http://127.0.0.1:{port}"
    try:
        worker.expect("READY", 120)
        wait_healthy(base, server)
        rows = []
        for n in streams:
            spies = []
            if profile is not None and n == max(streams):
                profile.mkdir(parents=True, exist_ok=True)
                for who, pid in (("worker", worker.proc.pid), ("server", server.pid)):
                    spies.append(pyspy.record(pid, profile / f"streaming_{who}_{n}.txt"))
            pids = {"worker": worker.proc.pid, "server": server.pid, "readers": os.getpid()}
            cpu0 = {who: _cpu(who, pid) for who, pid in pids.items()}
            pg0, host0 = backend_cpu_seconds(name), host_cpu()
            try:
                row = pooled(
                    n, pieces, [asyncio.run(latency_round(base, n)) for _ in range(rounds)]
                )
            finally:
                for spy in spies:
                    pyspy.stop(spy)
            for who, pid in pids.items():
                row[f"{who}_cpu_s"] = round((_cpu(who, pid) - cpu0[who]) / rounds, 2)
            row["postgres_cpu_s"] = round((backend_cpu_seconds(name) - pg0) / rounds, 2)
            row["host_busy_pct"] = round(host_busy_pct(host0), 1)
            row["profiled"] = bool(spies)
            row["server_workers"] = server_workers
            rows.append(row)
        return rows
    finally:
        server.terminate()
        worker.proc.terminate()
        server.wait(30)
        worker.proc.wait(60)
        drop_database(server_url, name)


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
    """bench/streaming_floor.py's ``mode`` with ``n`` streams started over ``ramp_ms`` (as
    our own sessions started in the round before), read by the same readers."""
    name = "dbos_agents_bench_floor"
    url = create_fresh_database(server_url, name) if mode == "notify" else None
    script = str(HERE / "streaming_floor.py")
    common = ["--streams", str(n), "--pieces", str(pieces), "--pace-ms", str(pace_ms)]
    offsets = [i * ramp_ms / max(1, n - 1) for i in range(n)]
    port = free_port()
    db = ["--database-url", url] if url else []
    producer = None
    if url:
        spread = ",".join(f"{o:.1f}" for o in offsets)
        producer = Child(
            [sys.executable, script, "--produce", *db, *common, "--offsets-ms", spread]
        )
        producer.expect("READY", 60)
    cmd = [sys.executable, script, "--serve", mode, "--port", str(port), *common, *db]
    server = subprocess.Popen(cmd)
    try:
        _wait_for_port(port)
        pids = {"server": server.pid, "readers": os.getpid()}
        if producer is not None:
            pids["worker"] = producer.proc.pid
        cpu0 = {who: cpu_seconds(pid) for who, pid in pids.items()}
        pg0, host0 = backend_cpu_seconds(name), host_cpu()
        base = f"http://127.0.0.1:{port}"

        async def run() -> list[tuple[int, float]]:
            paths = [f"/floor/{i}?offset={offsets[i] / 1000:.4f}" for i in range(n)]
            return await asyncio.gather(*(_read(base, path, "", out) for path in paths))

        out: list[float] = []
        row = _figures(n, pieces, asyncio.run(run()), out)
        for who in ("worker", "server", "readers"):
            pid = pids.get(who)
            row[f"{who}_cpu_s"] = round(cpu_seconds(pid) - cpu0[who], 2) if pid else 0.0
        row["postgres_cpu_s"] = round(backend_cpu_seconds(name) - pg0, 2)
        row["host_busy_pct"] = round(host_busy_pct(host0), 1)
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
    cmd = [sys.executable, str(HERE / "streaming_turns.py"), "--server-url", server_url]
    cmd += ["--sessions", str(sessions), "--turns", str(turns), "--rounds", str(rounds)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def peer(server_url: str, sessions: int, turns: int) -> dict[str, Any] | None:
    if not PEER_PY.exists():
        return None
    name = "dbos_agents_bench_lg_stream"
    url = create_fresh_database(server_url, name)
    try:
        cmd = [str(PEER_PY), str(HERE / "peers" / "langgraph_stream.py"), "--database-url", url]
        cmd += ["--sessions", str(sessions), "--turns", str(turns)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=HERE / "peers")
        lines = [json.loads(x) for x in out.stdout.strip().splitlines() if x.startswith("{")]
        line: dict[str, Any] = next(x for x in lines if x["system"] == "langgraph_stream")
        return line
    finally:
        drop_database(server_url, name)


def report(console: Console, lat: list[dict[str, Any]], turns: dict[str, Any] | None) -> None:
    console.print(
        "\n[bold]Adapter -> SSE reader[/bold] (ms; pieces stamped as they leave the adapter)"
    )
    console.print(
        "| streams | pieces | p50 | p90 | p99 | max | sessions with a wrong count"
        " | starts spread ms | CPU s: worker | server | readers | Postgres | host busy % |"
    )
    console.print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in lat:
        console.print(
            f"| {r['streams']}{' (py-spy)' if r['profiled'] else ''}"
            f"{' (' + r['label'] + ')' if r.get('label') else ''} | {r['pieces']}"
            f" | {r['p50_ms']} | {r['p90_ms']} | {r['p99_ms']} | {r['max_ms']}"
            f" | {r['sessions_with_wrong_count']} | {r['ramp_ms']} | {r['worker_cpu_s']}"
            f" | {r['server_cpu_s']}"
            f" | {r['readers_cpu_s']} | {r['postgres_cpu_s']} | {r['host_busy_pct']} |"
        )
    for r in lat:
        if r.get("rounds", 1) > 1:
            each = ", ".join(f"{x:g}" for x in r["round_p99_ms"])
            console.print(
                f"{r['streams']} streams: {r['rounds']} rounds pooled; p99 per round {each}"
            )
    if turns is None:
        return
    console.print("\n[bold]Per turn[/bold] (ms, median of the rounds' medians)")
    console.print("| system | ms per turn | x streaming off | delta rows / turn | batches / turn |")
    console.print("|---|---:|---:|---:|---:|")
    off = turns["off_ms"]
    console.print(f"| dbos-agents, streaming off | {off} | 1.00x | 0 | - |")
    console.print(
        f"| dbos-agents, streaming on | {turns['on_ms']} | {turns['on_ms'] / off:.2f}x"
        f" | {turns['rows_per_turn']} | {turns['batches_per_turn']} |"
    )
    lg = turns.get("langgraph_stream")
    if lg is not None:
        ms = lg["ms_per_turn_median"]
        console.print(
            f"| LangGraph + AsyncPostgresSaver, streaming | {ms} | {ms / off:.2f}x | - | - |"
        )
        console.print(f"\nours (streaming) / LangGraph (streaming): {turns['on_ms'] / ms:.2f}x")


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument(
        "--server-url", default=os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", LOCAL_SERVER)
    )
    p.add_argument("--streams", default="1,200")
    p.add_argument("--peers", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("--profile", type=Path, help="py-spy the worker and server at the largest N")
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
    args = p.parse_args()
    streams = [int(x) for x in args.streams.split(",") if x]
    with cli.report_to_stderr(args.json):
        console = Console()
        console.print(f"[streaming] latency: {streams} streams, {args.pieces} pieces each")
        lat = latency(
            args.server_url,
            streams,
            args.pieces,
            args.pace_ms,
            args.profile,
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
        report(console, lat, turns)
    if args.json:
        cli.print_json({"latency": lat, "per_turn": turns, "versions": cli.versions()})


if __name__ == "__main__":
    main()
