"""bench/concurrency.py's table and goals, for its console report and for docs/benchmarks.md
(bench/sections.py): one place, so the two show the same columns and judge the same way.
The goals are printed, never asserted."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from _lib.tables import rich_table
from rich.console import Console

GOAL_SESSIONS = 200
"""The goals are set at this many sessions at once; a smaller run is shown, not judged."""

HEADER = (
    "system", "N", "model ms", "turns/s", "x LangGraph", "CPU ms/turn", "x 1 session",
    "PG CPU ms/turn", "PG x LangGraph", "xacts/turn", "stmts/turn", "new conns",
    "p50 s", "p99 s", "failed",
)  # fmt: skip


SHORT = {"ours": "dbos-agents", "langgraph": "LangGraph", "pydantic_ai": "Pydantic AI + DBOS"}
"""The console's names (the markdown table has the full labels)."""


def _f(x: float | None, fmt: str, suffix: str = "") -> str:
    return "-" if x is None else f"{x:{fmt}}{suffix}"


def table_rows(res: dict[str, Any], short: bool = False) -> list[tuple[str, ...]]:
    """One line per (system, N, model ms), in HEADER's columns (``short``: SHORT names)."""
    out = []
    for r in res["rows"]:
        name = (SHORT if short else res["labels"]).get(r["system"], r["system"])
        if "error" in r:
            out.append((name, str(r["sessions"]), f"{r['model_ms']:g}", "failed", *[""] * 11))
            continue
        out.append(
            (
                f"**{name}**" if r["system"] == "ours" else name,
                str(r["sessions"]),
                f"{r['model_ms']:g}",
                _f(r["turns_per_s"], ".1f"),
                _f(r.get("vs_langgraph"), ".2f", "x"),
                _f(r["cpu_ms_per_turn"], ".2f"),
                _f(r.get("cpu_vs_1"), ".2f", "x"),
                _f(r["pg_cpu_ms_per_turn"], ".2f"),
                _f(r.get("pg_vs_langgraph"), ".2f", "x"),
                _f(r["xacts_per_turn"], ".1f"),
                _f(r["stmts_per_turn"], ".1f"),
                _f(r["new_connections"], ".0f"),
                _f(r["session_p50_s"], ".2f"),
                _f(r["session_p99_s"], ".2f"),
                str(r["failed"]),
            )
        )
    return out


def _pick(rows: Sequence[dict[str, Any]], ms: float) -> tuple[dict[str, Any] | None, bool]:
    """Ours' row at GOAL_SESSIONS and ``ms``; else at the most sessions measured and the
    nearest model latency (then not judged). The bool says whether it is the goal's own."""
    ours = [r for r in rows if r["system"] == "ours" and r["sessions"] > 1 and "error" not in r]
    if not ours:
        return None, False
    exact = [r for r in ours if r["sessions"] == GOAL_SESSIONS and r["model_ms"] == ms]
    if exact:
        return exact[0], True
    top = max(r["sessions"] for r in ours)
    return min(
        (r for r in ours if r["sessions"] == top), key=lambda r: abs(r["model_ms"] - ms)
    ), False


def goal_rows(rows: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, str]]:
    """(figure, value, goal, met) of each goal, judged on ours' rows and their ratios."""
    specs = [
        ("vs_langgraph", 50.0, "turns/s, ours / LangGraph", 1.2, ">="),
        ("cpu_vs_1", 50.0, "ours' process CPU per turn / at 1 session", 1.2, "<="),
        ("cpu_vs_1", 1000.0, "ours' process CPU per turn / at 1 session", 1.2, "<="),
        ("pg_vs_langgraph", 50.0, "Postgres CPU per turn, ours / LangGraph", 1.5, "<="),
        ("pg_vs_langgraph", 1000.0, "Postgres CPU per turn, ours / LangGraph", 1.5, "<="),
    ]
    out: list[tuple[str, str, str, str]] = []
    seen: set[tuple[str, int, float]] = set()
    for key, ms, what, bound, op in specs:
        row, exact = _pick(rows, ms)
        if row is None or (key, row["sessions"], row["model_ms"]) in seen:
            continue
        seen.add((key, row["sessions"], row["model_ms"]))
        figure = f"{what}, {row['sessions']} sessions, {row['model_ms']:g} ms model"
        x = row.get(key)
        goal = f"{op} {bound}x at {GOAL_SESSIONS} sessions, {ms:g} ms"
        if x is None:
            out.append((figure, "not measured", goal, "n/a"))
            continue
        ok = x >= bound if op == ">=" else x <= bound
        met = ("yes" if ok else "**no**") if exact else "n/a (not the goal's size)"
        out.append((figure, f"{x:.2f}x", goal, met))
    return out


def with_goals(res: dict[str, Any]) -> dict[str, Any]:
    """``res`` with its judged goals (as bench/concurrency.py's JSON carries them)."""
    goals = [
        dict(zip(("figure", "value", "goal", "met"), g, strict=True))
        for g in goal_rows(res["rows"])
    ]
    return {**res, "goals": goals}


def print_report(res: dict[str, Any], console: Console) -> None:
    a = res["args"]
    table = rich_table(
        f"{a['turns']} tool turns per session, N sessions at once, {a['rounds']} round(s):"
        " medians of the rounds",
        HEADER,
    )
    for line in table_rows(res, short=True):
        table.add_row(*(x.replace("**", "") for x in line))
    console.print(table)
    console.print("; ".join(f"{SHORT.get(k, k)}: {v}" for k, v in res["labels"].items()))
    goals = rich_table("goals (printed, not asserted)", ("figure", "value", "goal", "met"))
    for g in goal_rows(res["rows"]):
        goals.add_row(*(x.replace("**", "") for x in g))
    console.print(goals)
    if not res["statements"]["available"]:
        console.print(f"stmts/turn not measured: {res['statements']['reason']}")
    for r in res["rows"]:
        if r.get("errors") or "error" in r:
            console.print(f"[red]{r['system']} {r['sessions']} x {r['model_ms']:g} ms:[/red]"
                          f" {r.get('error') or r['errors']}")  # fmt: skip
        if r.get("top_statements"):
            console.print(f"top statements, {r['system']} {r['sessions']} x {r['model_ms']:g} ms:")
            for s in r["top_statements"][:5]:
                console.print(f"  {s['total_ms']:9.1f} ms {s['calls']:7d} calls  {s['query']}")
