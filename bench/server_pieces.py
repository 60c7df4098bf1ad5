"""The HTTP server's CPU per piece it streams: one or more builds of ``dbos-agents serve``
on one database, rounds alternated between them, no worker: a writer appends delta rows
and announces them as the worker's batches do (``deltas.insert_announced_stmt``), and
``--streams`` SSE readers follow ``GET /sessions/{id}/events`` until they have every piece.

What it isolates: the server's share of a live stream (the feed's hand-over, the follow
loop, the encoding, the sends), without a worker or a model on the same cores. The figure
is the server process's CPU (user + system, from /proc) per piece per stream, the median
over rounds; its stream opening (one full read each) is in it, spread over the pieces.
``--rows`` is how many pieces a session's notification carries (1: a worker that keeps
up; more: batches of a busy worker, or a slow model's pieces piling up between flushes).

    python bench/server_pieces.py --server-url URL [--streams 100] [--pieces 60]
        [--rows 1,4] [--rounds 4] [--build DIR --build DIR] [--profile DIR]

``--build`` (repeatable) names a checkout to serve from (``PYTHONPATH`` and working
directory), to compare builds in one run: the first is the baseline of the ratio column.
Default: this checkout alone. ``--floor`` adds the floor as one more build: the same SSE
stack fed by the same notifications with nothing of ours between (``_lib/floor_server.py``),
so the run gives the ratio to it. ``--profile DIR``: py-spy records each build's server over
all its rounds (``DIR/server-<n>.txt``, raw stacks, busy samples only; ``--gil``: only the thread holding
the GIL) and prints the functions with the most samples.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from _lib import cli, pyspy
from _lib.internals import announced_pieces
from _lib.procfs import raise_nofile, stat_user_system_seconds
from _lib.serve import wait_healthy
from _lib.sse_reader import follow

from dbos_agents.testing import create_fresh_database, drop_database
from dbos_agents.testing.cluster import free_port

ROOT = Path(__file__).resolve().parent.parent
FLOOR = Path("floor")
"""The build name of ``--floor``."""


def _cpu(pid: int) -> tuple[float, float]:
    """The process's user + system and system CPU seconds."""
    user, system = stat_user_system_seconds(f"/proc/{pid}/stat")
    return user + system, system


def _serve(build: Path, url: str, port: int) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "dbos_agents.cli", "serve", "--allow-unauthenticated"]
    if build == FLOOR:
        build, cmd = ROOT, [sys.executable, str(ROOT / "bench" / "_lib" / "floor_server.py")]
    return subprocess.Popen(
        [*cmd, "--port", str(port), "--database-url", url],
        cwd=build,
        env={**os.environ, "PYTHONPATH": str(build), "DBOS_AGENTS_DATABASE_URL": url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _write(engine: sa.Engine, sql: str, params: Mapping[str, Any]) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text(sql), params)


async def _round(
    engine: sa.Engine, port: int, streams: int, pieces: int, rows: int, pace: float
) -> int:
    """One round: new sessions, their readers, the writer's batches; the readers that
    got every piece."""
    sids = [f"ses_bench_{uuid.uuid4().hex[:12]}" for _ in range(streams)]
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO dbos_agents.sessions (id, root_session_id, agent, status,"
                " run_seq, workflow_id) VALUES (:s, :s, 'bench', 'running', 1, :s)"
            ),
            [{"s": s} for s in sids],
        )
    want = pieces * rows
    done = 0

    async def read(sid: str) -> None:
        nonlocal done
        seen = 0

        def on_event(kind: str, _data: bytes, _now: float) -> bool:
            nonlocal seen
            seen += kind == "delta"
            return seen == want

        await follow("127.0.0.1", port, f"/sessions/{sid}/events", {}, on_event)
        done += seen == want

    readers = [asyncio.create_task(read(s)) for s in sids]
    await asyncio.sleep(1.0 + streams / 100)  # every stream open and waiting
    for k in range(pieces):
        sql, params = announced_pieces(sids, k * rows, rows, "8 chars.")
        await asyncio.to_thread(_write, engine, sql, params)
        await asyncio.sleep(pace)
    await asyncio.wait_for(asyncio.gather(*readers), 300)
    return done


def run(
    server_url: str, builds: list[Path], streams: int, pieces: int, rows: list[int], rounds: int,
    pace_ms: float, profile: Path | None = None, gil: bool = False,
) -> list[dict[str, Any]]:  # fmt: skip
    name = "dbos_agents_bench_server_pieces"
    url = create_fresh_database(server_url, name)
    subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", "migrate", "--database-url", url],
        check=True,
        capture_output=True,
    )
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://"))
    ports = [free_port() for _ in builds]
    servers = [_serve(b, url, p) for b, p in zip(builds, ports, strict=True)]
    out: list[dict[str, Any]] = []
    spies: list[subprocess.Popen[bytes]] = []
    try:
        for p, server in zip(ports, servers, strict=True):
            wait_healthy(f"http://127.0.0.1:{p}", server)
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            spies = [
                pyspy.record(s.pid, profile / f"server-{i}.txt", *(["--gil"] if gil else []))
                for i, s in enumerate(servers)
            ]
        for r in rows:
            per: list[list[tuple[float, float]]] = [[] for _ in builds]
            complete = [0 for _ in builds]
            for i in range(rounds):
                order = list(range(len(builds)))
                for b in order if i % 2 == 0 else order[::-1]:
                    (c0, s0) = _cpu(servers[b].pid)
                    complete[b] += asyncio.run(
                        _round(engine, ports[b], streams, pieces, r, pace_ms / 1000)
                    )
                    (c1, s1) = _cpu(servers[b].pid)
                    n = streams * pieces * r
                    per[b].append(((c1 - c0) / n * 1e6, (s1 - s0) / n * 1e6))
            for b, build in enumerate(builds):
                out.append(
                    {
                        "build": str(build),
                        "rows_per_notification": r,
                        "us_per_piece": round(statistics.median(x for x, _ in per[b]), 1),
                        "system_us_per_piece": round(statistics.median(y for _, y in per[b]), 1),
                        "rounds_us": [round(x, 1) for x, _ in per[b]],
                        "streams_complete": f"{complete[b]}/{streams * rounds}",
                    }
                )
        return out
    finally:
        for spy in spies:
            pyspy.stop(spy)
        for s in servers:
            s.terminate()
        for s in servers:
            s.wait(30)
        engine.dispose()
        drop_database(server_url, name)


def _print(rows: list[dict[str, Any]], streams: int, pieces: int) -> None:
    print(f"\nServer CPU per piece per stream ({streams} streams, {pieces} notifications each)")
    print(
        "| build | rows / notification | us per piece | of it system | x first | rounds (us) | streams complete |"
    )
    print("|---|---:|---:|---:|---:|---|---:|")
    base: dict[int, float] = {}
    for row in rows:
        first = base.setdefault(row["rows_per_notification"], row["us_per_piece"])
        print(
            f"| {row['build']} | {row['rows_per_notification']} | {row['us_per_piece']}"
            f" | {row['system_us_per_piece']} | {row['us_per_piece'] / first:.2f}x"
            f" | {', '.join(map(str, row['rounds_us']))} | {row['streams_complete']} |"
        )  # fmt: skip


def _print_profile(path: Path, build: Path) -> None:
    if not path.exists():
        print(f"\nno profile of {build} (py-spy wrote nothing)")
        return
    got = pyspy.summarize(str(path), top=40)
    print(f"\n{build}: {got['samples']} busy samples")
    for kind in ("threads", "inclusive", "self"):
        print(f"  {kind}:")
        for name, _n, share in got[kind]:
            print(f"    {share * 100:5.1f}%  {name}")


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument("--server-url", required=True)
    p.add_argument("--build", action="append", type=Path, help="a checkout to serve from")
    p.add_argument("--rows", default="1", help="rows per notification, comma-separated")
    p.add_argument("--json", action="store_true")
    p.add_argument("--floor", action="store_true", help="add the floor as the last build")
    p.add_argument("--profile", type=Path, help="py-spy each server into this directory")
    p.add_argument("--gil", action="store_true", help="profile only the thread holding the GIL")
    cli.options(p, streams=100, pieces=60, rounds=4, pace_ms=20.0)
    args = p.parse_args()
    raise_nofile()
    builds = [b.resolve() for b in args.build] if args.build else [ROOT]
    builds += [FLOOR] if args.floor else []
    rows = [int(x) for x in args.rows.split(",")]
    with cli.report_to_stderr(args.json):
        out = run(
            args.server_url, builds, args.streams, args.pieces, rows, args.rounds, args.pace_ms,
            args.profile, args.gil,
        )  # fmt: skip
        _print(out, args.streams, args.pieces)
        if args.profile is not None:
            for i, build in enumerate(builds):
                _print_profile(args.profile / f"server-{i}.txt", build)
    if args.json:
        cli.print_json(out)


if __name__ == "__main__":
    main()
