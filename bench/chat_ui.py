"""Chat UIs: what a page built on the AI SDK's useChat waits for, with N chats at once on
one worker: the first token after the model's first delta, and a client tool's round trip.

A worker (bench/chat_ui_worker.py: its model stamps each piece with its index and the
moment it leaves the adapter), ``dbos-agents serve`` (anonymous callers, session tokens
signed with a secret) and one Node process (js/bench/ai-sdk-load.mjs: the official
``AbstractChat`` + ``DefaultChatTransport``) run apart on a fresh database. For each N in
``--chats`` the Node process runs, ``--rounds`` times, N chats with the agent ``stamp`` at
once, then N chats with ``asker`` (a client tool answered by ``onToolCall`` +
``addToolOutput``, posted by ``sendAutomaticallyWhen``, then a streamed answer), and
prints one JSON line per chat:

- first token: the first ``text-delta``'s arrival at the client minus its stamp;
- client-tool round trip: ``onToolCall`` -> the first ``text-delta`` of the answer,
  split into onToolCall -> the transport's POST, POST -> the model's first piece, and that
  piece -> the client;
- wrong text: chats whose final text is not exactly the stamped pieces once each.

The floor (``--floor``, the default): for each N, before ours, the same Node script with
the same options against bench/chat_ui_floor.py, a server with no database that streams
the same parts for the same agents (one process, started once a run): what HTTP, SSE and
the AI SDK client cost on this host, at its load, without us. Its figures go in each row
as ``floor_*`` keys; the tables add it and ours / floor.

    python bench/chat_ui.py [--chats 1,100] [--rounds 3] [--pieces 20] [--pace-ms 50]
        [--lead-ms 500] [--jitter-ms 50] [--spread-ms 1000] [--timeout 300] [--profile DIR]
        [--db-name NAME] [--json] [--server-url URL] [--server-workers 1] [--no-floor]

How to read the figures, and what was found: docs/bench-notes/chat_ui.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chat_ui_floor as floor
from _lib import cli, pyspy
from _lib.child import Child
from _lib.db import LOCAL_SERVER
from _lib.procfs import backend_cpu_seconds, cpu_seconds, host_busy_pct, host_cpu, tree_cpu_seconds
from _lib.serve import wait_healthy
from _lib.stats import pct
from _lib.tables import rich_table
from rich.console import Console

from dbos_agents.testing import create_fresh_database, drop_database
from dbos_agents.testing.cluster import free_port

HERE = Path(__file__).resolve().parent
JS = HERE.parent / "js"
LOAD = JS / "bench" / "ai-sdk-load.mjs"
DB_NAME = "dbos_agents_bench_chat_ui"

GOAL_FIRST_TOKEN_MS = 15.0
"""Issue 28: first token at the client after the model's first delta, p50, 100 chats."""
GOAL_ROUND_TRIP_MS = 30.0
"""Issue 28: tool input shown -> output posted -> next text delta at the client, p50."""


@contextlib.contextmanager
def processes(
    server_url: str, db_name: str, worker_args: list[str], server_workers: int = 1
) -> Iterator[tuple[str, Child, int]]:
    """A fresh database, the worker and ``dbos-agents serve`` on it: (base URL, worker,
    server pid); both stopped and the database dropped afterwards."""
    url = create_fresh_database(server_url, db_name)
    env = {
        **os.environ,
        "DBOS_AGENTS_DATABASE_URL": url,
        "DBOS_AGENTS_SERVER_SECRET": secrets.token_urlsafe(32),
    }
    port = free_port()
    worker = Child(
        [sys.executable, str(HERE / "chat_ui_worker.py"), "--database-url", url, *worker_args],
        env=env,
    )
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "dbos_agents.cli", "serve", "--allow-unauthenticated"),
            *("--port", str(port), "--database-url", url),
            *("--workers", str(server_workers)),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "w"),  # noqa: SIM115
    )
    base = f"http://127.0.0.1:{port}"
    try:
        worker.expect("READY", 120)
        wait_healthy(base, server)
        yield base, worker, server.pid
    finally:
        server.terminate()
        worker.stop(60)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        drop_database(server_url, db_name)


def run_node(args: Any, base: str, n: int) -> list[Any]:
    """js/bench/ai-sdk-load.mjs with ``n`` chats at once, ``args.rounds`` times; its JSON
    lines (one a chat, then ``done``)."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("Node is not installed (bench/chat_ui.py runs the official AI SDK)")
    if not (JS / "node_modules" / "ai").is_dir():
        raise SystemExit("the JS clients are not installed: run `npm ci --prefix js`")
    cfg = {"url": base, "chats": n, "pieces": args.pieces, "rounds": args.rounds}
    cfg |= {"spreadMs": args.spread_ms, "timeoutMs": args.timeout * 1000}
    proc = subprocess.run(
        [node, str(LOAD), json.dumps(cfg)],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=args.rounds * (2 * args.timeout + 60),
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"node exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    return [json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{")]


def _p(xs: list[float], q: float) -> float | None:
    return round(pct(xs, q), 2) if xs else None


def summarize(n: int, rounds: int, lines: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of the table from the Node process's lines (``rounds`` rounds pooled)."""
    chats = [x for x in lines if "chat" in x]
    done = next((x for x in lines if x.get("event") == "done"), {})

    def col(key: str) -> list[float]:
        return [float(c[key]) for c in chats if c.get(key) is not None]

    first, trip = col("first_token_ms"), col("round_trip_ms")
    pieces = [float(x) for c in chats for x in c["piece_ms"]]
    wrong = [c for c in chats if not (c["stamp_ok"] and c["tool_ok"])]
    row: dict[str, Any] = {
        "chats": n,
        "rounds": rounds,
        "chats_reported": len(chats),
        "first_token_p50_ms": _p(first, 50),
        "first_token_p99_ms": _p(first, 99),
        "round_trip_p50_ms": _p(trip, 50),
        "round_trip_p99_ms": _p(trip, 99),
        "round_trip_post_p50_ms": _p(col("round_trip_post_ms"), 50),
        "round_trip_resume_p50_ms": _p(col("round_trip_resume_ms"), 50),
        "round_trip_headers_p50_ms": _p(col("round_trip_headers_ms"), 50),
        "round_trip_deliver_p50_ms": _p(col("round_trip_deliver_ms"), 50),
        "pieces": len(pieces),
        "piece_p50_ms": _p(pieces, 50),
        "piece_p99_ms": _p(pieces, 99),
        "stamp_headers_p50_ms": _p(col("stamp_headers_ms"), 50),
        "opened_after_first_piece": sum(1 for c in chats if c["opened_after_first_piece"]),
        "chats_with_wrong_text": len(wrong) + n * rounds - len(chats),
        "errors": sorted({e for c in wrong for e in c["stamp_errors"] + c["tool_errors"]})[:5],
        "stamp_phase_s": done.get("stamp_phase_s"),
        "asker_phase_s": done.get("asker_phase_s"),
        "clock_skew_ms": done.get("clock_skew_ms"),
        "node_cpu_s": done.get("node_cpu_s"),
        "node_loop_lag_p99_ms": done.get("loop_lag_p99_ms"),
        "samples_first_token_ms": [round(x, 3) for x in first],
        "samples_round_trip_ms": [round(x, 3) for x in trip],
    }
    return row


def _ms(x: float | None) -> str:
    return "-" if x is None else f"{x:.1f}"


def goals_met(r: dict[str, Any]) -> str:
    """The goal column: both p50s within the issue's goals."""
    ft, rt = r["first_token_p50_ms"], r["round_trip_p50_ms"]
    ok = ft is not None and rt is not None
    ok = ok and ft <= GOAL_FIRST_TOKEN_MS and rt <= GOAL_ROUND_TRIP_MS
    return "met" if ok else "not met"


def report(console: Console, rows: list[dict[str, Any]]) -> None:
    t = rich_table(
        f"AI SDK chats on one worker (ms; goals: first token p50 <= {GOAL_FIRST_TOKEN_MS:g},"
        f" client-tool round trip p50 <= {GOAL_ROUND_TRIP_MS:g})",
        ("N", "first token p50", "p99", "tool round trip p50", "p99", "goal", "wrong text"),
    )
    for r in rows:
        t.add_row(
            str(r["chats"]),
            *(_ms(r[k]) for k in ("first_token_p50_ms", "first_token_p99_ms")),
            *(_ms(r[k]) for k in ("round_trip_p50_ms", "round_trip_p99_ms")),
            goals_met(r),
            str(r["chats_with_wrong_text"]),
        )
    console.print(t)
    floor.report(console, rows)
    t = rich_table(
        "Where the time goes (ms, p50)",
        ("N", "tool -> POST", "POST -> headers", "POST -> piece", "piece -> client",
         "all pieces", "p99", "late streams"),
    )  # fmt: skip
    keys = ("round_trip_post_p50_ms", "round_trip_headers_p50_ms", "round_trip_resume_p50_ms",
            "round_trip_deliver_p50_ms", "piece_p50_ms", "piece_p99_ms", "opened_after_first_piece")  # fmt: skip
    for r in rows:
        for label, pre in ((str(r["chats"]), ""), (f"{r['chats']} floor", "floor_")):
            if pre + keys[0] in r:
                t.add_row(label, *(_ms(r[pre + k]) for k in keys[:-1]), str(r[pre + keys[-1]]))
    console.print(t)
    t = rich_table(
        "CPU over each N (s)",
        ("N", "wall", "worker", "server", "Postgres", "Node", "Node lag p99 ms", "host busy %"),
    )
    for r in rows:
        wall = (r["stamp_phase_s"] or 0) + (r["asker_phase_s"] or 0)
        t.add_row(
            str(r["chats"]) + (" (py-spy)" if r["profiled"] else ""),
            f"{wall:.1f}",
            *(f"{r[k]:.2f}" for k in ("worker_cpu_s", "server_cpu_s", "postgres_cpu_s")),
            f"{r['node_cpu_s'] or 0:.2f}",
            _ms(r["node_loop_lag_p99_ms"]),
            f"{r['host_busy_pct']:.0f}",
        )
        if "floor_node_cpu_s" in r:
            wall = (r["floor_stamp_phase_s"] or 0) + (r["floor_asker_phase_s"] or 0)
            t.add_row(
                f"{r['chats']} floor",
                *(f"{wall:.1f}", "-", f"{r['floor_server_cpu_s']:.2f}", "-"),
                f"{r['floor_node_cpu_s'] or 0:.2f}",
                _ms(r["floor_node_loop_lag_p99_ms"]),
                f"{r['floor_host_busy_pct']:.0f}",
            )
    console.print(t)
    for r in rows:
        if r["errors"]:
            console.print(f"[red]N={r['chats']}: errors[/red] {r['errors']}")


def measure(args: Any, chats: list[int], console: Console) -> list[dict[str, Any]]:
    worker_args = [
        *("--pieces", str(args.pieces), "--pace-ms", str(args.pace_ms)),
        *("--lead-ms", str(args.lead_ms), "--jitter-ms", str(args.jitter_ms)),
    ]
    rows = []
    with contextlib.ExitStack() as stack:
        floor_base, floor_proc = (
            stack.enter_context(floor.running(worker_args)) if args.floor else (None, None)
        )
        base, worker, server_pid = stack.enter_context(
            processes(args.server_url, args.db_name, worker_args, args.server_workers)
        )
        for k, n in enumerate(chats):
            floor_row: dict[str, Any] = {}
            if floor_base is not None and floor_proc is not None:
                console.print(f"[chat_ui] {n} chat(s) at once, floor")
                floor_cpu0, host0 = cpu_seconds(floor_proc.pid), host_cpu()
                lines = run_node(args, floor_base, n)
                floor_cpu = cpu_seconds(floor_proc.pid) - floor_cpu0
                floor_row = floor.fields(
                    summarize(n, args.rounds, lines), floor_cpu, host_busy_pct(host0)
                )
            console.print(f"[chat_ui] {n} chat(s) at once")
            spies: list[subprocess.Popen[bytes]] = []
            if args.profile is not None and n == max(chats):
                args.profile.mkdir(parents=True, exist_ok=True)
                for name, pid in (("worker", worker.pid), ("server", server_pid)):
                    out = args.profile / f"chat_ui_{name}_{n}_{k}.txt"
                    spies.append(pyspy.record(pid, out))
            cpu0 = [cpu_seconds(worker.pid), tree_cpu_seconds(server_pid)]
            pg0, host0 = backend_cpu_seconds(args.db_name), host_cpu()
            try:
                lines = run_node(args, base, n)
            finally:
                for spy in spies:
                    pyspy.stop(spy)
            row = summarize(n, args.rounds, lines)
            row["worker_cpu_s"] = round(cpu_seconds(worker.pid) - cpu0[0], 2)
            row["server_cpu_s"] = round(tree_cpu_seconds(server_pid) - cpu0[1], 2)
            row["postgres_cpu_s"] = round(backend_cpu_seconds(args.db_name) - pg0, 2)
            row["host_busy_pct"] = round(host_busy_pct(host0), 1)
            row["profiled"] = bool(spies)
            row["server_workers"] = args.server_workers
            rows.append(row | floor_row)
    return rows


def main() -> None:
    p = cli.parser(__doc__)
    p.add_argument(
        "--server-url", default=os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", LOCAL_SERVER)
    )
    p.add_argument("--chats", default="1,100", help="chats at once, a list")
    p.add_argument(
        "--server-workers", type=int, default=1, help="dbos-agents serve --workers (processes)"
    )
    p.add_argument("--json", action="store_true")
    p.add_argument("--profile", type=Path, help="py-spy the worker and server at the largest N")
    p.add_argument("--db-name", default=DB_NAME, help="the fresh database's name")
    p.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also run the client against bench/chat_ui_floor.py (no database), before ours",
    )
    cli.options(p, pieces=20, pace_ms=50.0, lead_ms=500.0, jitter_ms=50.0, spread_ms=1000.0)
    cli.options(p, rounds=3, timeout=300.0)
    args = p.parse_args()
    chats = [int(x) for x in args.chats.split(",") if x]
    if not chats or min(chats) < 1 or args.pieces < 1 or args.rounds < 1:
        p.error("--chats, --pieces and --rounds must be at least 1")
    with cli.report_to_stderr(args.json):
        console = Console(width=max(Console().width, 120))
        rows = measure(args, chats, console)
        report(console, rows)
    if args.json:
        keep = ("rounds", "pieces", "pace_ms", "lead_ms", "jitter_ms", "spread_ms", "floor")
        cli.print_json(
            {
                "rows": rows,
                "args": {k: getattr(args, k) for k in keep},
                "goals_ms": {"first_token_p50": GOAL_FIRST_TOKEN_MS,
                             "round_trip_p50": GOAL_ROUND_TRIP_MS},
                "versions": {**cli.versions(), "ai": _ai_version()},
            }
        )  # fmt: skip


def _ai_version() -> str:
    try:
        version: str = json.loads((JS / "node_modules" / "ai" / "package.json").read_text())[
            "version"
        ]
        return version
    except (OSError, ValueError, KeyError):
        return "unknown"


if __name__ == "__main__":
    main()
