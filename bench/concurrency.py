"""N sessions at once, T side-effecting tool turns each, on dbos-agents and its durable peers:
turns/s, CPU per turn (the system's process and its Postgres backends), session times, and
Postgres transactions, statements and WAL per turn.

Each run is one system, one configuration, in a process and on a database of its own (the
window of bench/_lib/pgwatch.py); every configuration runs in every round, ours first in
odd rounds, and ours also runs one session alone: the baseline of its CPU per turn. Method
and columns: docs/bench-notes/concurrency.md.

    python bench/concurrency.py [--sessions 50,200] [--model-ms 50,1000] [--turns 10]
        [--rounds 2] [--systems ours,langgraph,pydantic_ai] [--settle 11] [--json]
        [--database-url URL] [--db-prefix dbos_agents_bench_conc]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

import sqlalchemy as sa
from _lib import cli
from _lib.db import LOCAL_SERVER
from _lib.labels import CONCURRENCY_SYSTEMS
from _lib.pgwatch import (
    PEERS_PYTHON,
    STATS_IDLE_FLUSH_SEC,
    admin_engine,
    run_window,
    statements_unavailable,
)
from _lib.procfs import loadavg
from _lib.render import concurrency_section, show, with_goals
from _lib.stats import pct
from rich.console import Console

METRICS = (
    "wall_s", "turns_per_s", "cpu_ms_per_turn", "pg_cpu_ms_per_turn", "xacts_per_turn",
    "stmts_per_turn", "wal_kb_per_turn", "new_connections", "new_backends", "backends",
    "idle_cpu_pct",
)  # fmt: skip
"""Per-run figures whose median over the rounds is the row's figure."""


def log(msg: str) -> None:
    print(f"[concurrency] {msg}", file=sys.stderr, flush=True)


def plan(
    sessions: list[int], model_ms: list[float], systems: list[str]
) -> list[tuple[int, float, list[str]]]:
    """(N, L, systems) for one round: ours alone at one session first (the baseline of its
    CPU per turn), then every configuration on every system."""
    out = [(1, ms, ["ours"]) for ms in model_ms if "ours" in systems and 1 not in sessions]
    return out + [(n, ms, systems) for ms in model_ms for n in sessions]


def run_rounds(args: argparse.Namespace, admin: sa.Engine, stm: bool) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    for r in range(1, args.rounds + 1):
        for n, ms, systems in plan(args.sessions, args.model_ms, args.systems):
            order = (
                systems
                if r % 2 == 1
                else [s for s in systems if s != "ours"] + [s for s in systems if s == "ours"]
            )
            for system in order:
                log(f"round {r}/{args.rounds}: {system}, {n} sessions, model {ms:g} ms")
                try:
                    row = run_window(
                        admin, args.database_url, f"{args.db_prefix}_{system}", system,
                        sessions=n, turns=args.turns, model_ms=ms, settle=args.settle,
                        with_statements=stm,
                    )  # fmt: skip
                except Exception as exc:
                    log(f"failed: {exc}")
                    row = {"system": system, "sessions": n, "model_ms": ms, "error": str(exc)}
                runs.append({**row, "round": r})
                if "error" not in row:
                    log(
                        f"  {row['turns_per_s']:.1f} turns/s, CPU {row['cpu_ms_per_turn']:.2f}"
                        f" ms/turn, Postgres {row['pg_cpu_ms_per_turn']:.2f} ms/turn,"
                        f" {row['xacts_per_turn']:.1f} xacts/turn, {row['failed']} failed"
                    )
    return runs


def merge(runs: list[dict[str, Any]], systems: list[str]) -> list[dict[str, Any]]:
    """One row per (system, N, L): each figure's median over the rounds; session times
    pooled over the rounds (nearest-rank percentiles); ours' ratios."""
    keys = sorted({(r["model_ms"], r["sessions"], r["system"]) for r in runs},
                  key=lambda k: (k[0], k[1], systems.index(k[2])))  # fmt: skip
    rows = []
    for ms, n, system in keys:
        same = [r for r in runs if (r["model_ms"], r["sessions"], r["system"]) == (ms, n, system)]
        ok = [r for r in same if "error" not in r]
        row: dict[str, Any] = {"system": system, "label": CONCURRENCY_SYSTEMS[system]}
        row |= {"sessions": n, "model_ms": ms, "rounds_ok": len(ok), "rounds": len(same)}
        if not ok:
            rows.append({**row, "error": same[-1]["error"]})
            continue
        for m in METRICS:
            xs = [r[m] for r in ok if r[m] is not None]
            row[m] = statistics.median(xs) if xs else None
        secs = [s for r in ok for s in r["session_s"]]
        row |= {
            "turns": sum(r["turns"] for r in ok),
            "failed": sum(r["failed"] for r in ok),
            "errors": sorted({e for r in ok for e in r["errors"]})[:5],
            "session_p50_s": pct(secs, 50) if secs else None,
            "session_p99_s": pct(secs, 99) if secs else None,
            "session_max_s": max(secs) if secs else None,
            "rounds_turns_per_s": [round(r["turns_per_s"], 2) for r in ok],
            "top_statements": ok[-1]["top_statements"],
            "measures": ok[-1]["measures"],
        }
        rows.append(row)
    return with_ratios(rows)


def with_ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours' rows get ``vs_langgraph`` (turns/s), ``pg_vs_langgraph`` (Postgres CPU per turn)
    and ``cpu_vs_1`` (CPU per turn against ours at one session, same model latency)."""

    def find(system: str, n: int, ms: float) -> dict[str, Any] | None:
        return next(
            (r for r in rows if (r["system"], r["sessions"], r["model_ms"]) == (system, n, ms)
             and "error" not in r),
            None,
        )  # fmt: skip

    for r in rows:
        if r["system"] != "ours" or "error" in r:
            continue
        lg, one = find("langgraph", r["sessions"], r["model_ms"]), find("ours", 1, r["model_ms"])
        r["vs_langgraph"] = (
            r["turns_per_s"] / lg["turns_per_s"] if lg and lg["turns_per_s"] else None
        )
        r["pg_vs_langgraph"] = (
            r["pg_cpu_ms_per_turn"] / lg["pg_cpu_ms_per_turn"]
            if lg and lg["pg_cpu_ms_per_turn"]
            else None
        )
        r["cpu_vs_1"] = r["cpu_ms_per_turn"] / one["cpu_ms_per_turn"] if one else None
    return rows


def rounded(x: Any) -> Any:
    """``x`` with every float rounded to 4 decimals (the JSON's size and readability)."""
    if isinstance(x, float):
        return round(x, 4)
    if isinstance(x, dict):
        return {k: rounded(v) for k, v in x.items()}
    if isinstance(x, list):
        return [rounded(v) for v in x]
    return x


def int_list(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def float_list(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def print_report(res: dict[str, Any], console: Console) -> None:
    """The report's section, and each failed run's errors."""
    show(concurrency_section(res), console)
    for r in res["rows"]:
        if r.get("errors") or "error" in r:
            console.print(f"{r['system']} {r['sessions']} x {r['model_ms']:g} ms:"
                          f" {r.get('error') or r['errors']}")  # fmt: skip


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    p.add_argument("--sessions", type=int_list, default=[50, 200], help="N, a list: 50,200")
    p.add_argument("--model-ms", type=float_list, default=[50.0, 1000.0], help="L, a list")
    p.add_argument("--turns", type=int, default=10, help="tool-calling turns per session")
    p.add_argument("--rounds", type=int, default=2, help="alternated rounds")
    p.add_argument("--systems", default="ours,langgraph,pydantic_ai", help="and ours_streamed")
    p.add_argument(
        "--settle",
        type=float,
        default=STATS_IDLE_FLUSH_SEC + 1,
        help="idle seconds after the warm-up, so its statistics reach pg_stat_database",
    )
    p.add_argument("--db-prefix", default="dbos_agents_bench_conc")
    p.add_argument("--json", action="store_true", help="report on stderr, one JSON object")
    args = p.parse_args()
    args.systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    if unknown := set(args.systems) - set(CONCURRENCY_SYSTEMS):
        known = ", ".join(CONCURRENCY_SYSTEMS)
        p.error(f"unknown systems {sorted(unknown)}; known: {known}")
    if min([*args.sessions, args.turns, args.rounds]) < 1 or args.settle <= 0:
        p.error("sessions, turns and rounds must be at least 1, --settle above 0")
    if any(s != "ours" for s in args.systems) and not PEERS_PYTHON.exists():
        p.error("the peers need bench/peers/.venv: bash bench/peers/setup.sh")
    args.database_url = args.database_url or LOCAL_SERVER
    admin = admin_engine(args.database_url)
    console = Console(stderr=args.json, width=160)
    try:
        why_not = statements_unavailable(admin)
        if why_not:
            log(f"statements per turn not measured: {why_not}")
        load_before = loadavg()
        runs = run_rounds(args, admin, why_not is None)
    finally:
        admin.dispose()
    versions: dict[str, str] = {}
    for r in runs:
        versions |= r.get("versions", {})
    result = with_goals(
        rounded(
            {
                "args": {
                    **{k: v for k, v in vars(args).items() if k != "json"},
                    "database_url": None,
                },
                "labels": {s: CONCURRENCY_SYSTEMS[s] for s in args.systems},
                "statements": {"available": why_not is None, "reason": why_not},
                "rows": merge(runs, args.systems),
                "runs": [
                    {k: v for k, v in r.items() if k not in ("session_s", "versions")} for r in runs
                ],
                "loadavg": {"before": load_before, "after": loadavg()},
                "versions": versions,
            }
        )
    )
    print_report(result, console)
    if args.json:
        cli.print_json(result)


if __name__ == "__main__":
    main()
