"""bench/parked.py's figures and its console report (tables against the goals)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _lib.tables import rich_table
from parked_probe import Proc
from rich.console import Console

GOALS = {"rss_kb": 20.0, "threads": 64, "p50_ms": 20.0, "p99_ms": 100.0, "drain_per_s": 60.0}
"""The performance issue's goals for one worker holding many waiting sessions."""

WARM_SKIP = 100
"""Printed besides the goal's p50: the p50 of the samples after the first ``WARM_SKIP``, once
psycopg has prepared the resume's statements on each pooled connection (at a statement's
sixth run on a connection; DBOS's pool hands out its 20 in turn)."""


@dataclass
class Figures:
    sessions: int
    parked: int
    park_after_s: float | None  # the worker's park_after_sec (None: waits stay in memory)
    park_s: float
    park_rate: float
    park_worker_cpu_s: float
    baseline_rss_mb: float
    warm_rss_mb: float
    parked_rss_mb: float
    rss_kb_per_session: float
    rss_kb_per_session_after_warmup: float
    baseline_threads: int
    parked_threads: int
    max_threads: int
    pg_conns_parked: int
    pg_conns_max: int
    pg_conns_by_app: dict[str, int]
    db_backends_total: int
    idle_s: float
    idle_cpu_pct: float
    base_idle_cpu_pct: float
    samples: int
    p50_ms: float
    p90_ms: float
    p99_ms: float
    max_ms: float
    tool_p50_ms: float
    tool_p99_ms: float
    hot_samples: int  # answered within park_after_sec (0 when parking is off)
    hot_p50_ms: float
    hot_p99_ms: float
    burst: int
    burst_done: int
    burst_failed: int
    drain_s: float
    drain_per_s: float
    submits_s: float
    cpu_ms_per_turn: float
    burst_host_busy_pct: float
    pg_cpu_ms_per_turn: float
    bench_cpu_ms_per_turn: float
    wal_kb_per_resume: float  # the sequential samples'
    fpi_per_resume: float
    burst_wal_kb_per_turn: float
    burst_fpi_per_turn: float
    burst_p50_ms: float
    burst_p99_ms: float
    failed_before_park: int
    load_avg_before: str
    load_avg_after: str
    warm_p50_ms: float = float("nan")  # the sequential samples after the first WARM_SKIP


def _ok(met: bool) -> str:
    return "[green]yes[/green]" if met else "[red]no[/red]"


def _goal_rows(f: Figures) -> list[tuple[str, str, str, str]]:
    """(figure, value, goal, met) rows of the summary table."""
    out: list[tuple[str, str, str, str]] = []

    def row(figure: str, value: str, goal: str = "", met: str = "") -> None:
        out.append((figure, value, goal, met))

    g = GOALS
    row(
        f"time to park {f.sessions} (first start -> last armed)",
        f"{f.park_s:.1f} s ({f.park_rate:.0f}/s, worker CPU {f.park_worker_cpu_s:.1f} s)",
    )
    row(
        "RSS above launch baseline per waiting session",
        f"{f.rss_kb_per_session:.1f} KB",
        f"<= {g['rss_kb']:.0f} KB",
        _ok(f.rss_kb_per_session <= g["rss_kb"]),
    )
    row("  same, above the after-warm-up figure", f"{f.rss_kb_per_session_after_warmup:.1f} KB")
    row("RSS baseline -> parked", f"{f.baseline_rss_mb:.0f} -> {f.parked_rss_mb:.0f} MB")
    row(
        "OS threads: baseline / parked / max seen",
        f"{f.baseline_threads} / {f.parked_threads} / {f.max_threads}",
        f"<= {g['threads']}",
        _ok(f.max_threads <= g["threads"]),
    )
    row(
        "Postgres connections of the worker: parked / max seen",
        f"{f.pg_conns_parked} / {f.pg_conns_max}",
    )
    row(
        "  by application_name [state]",
        ", ".join(f"{k} {v}" for k, v in f.pg_conns_by_app.items()),
    )
    row("  all backends of the bench database (incl. bench client)", str(f.db_backends_total))
    row(
        f"worker CPU while parked, idle {f.idle_s:.0f} s",
        f"{f.idle_cpu_pct:.1f} % of one core (before parking: {f.base_idle_cpu_pct:.1f} %)",
    )
    row(
        f"submit -> run finished, p50 ({f.samples} sequential)",
        f"{f.p50_ms:.1f} ms",
        f"<= {g['p50_ms']:.0f} ms",
        _ok(f.p50_ms <= g["p50_ms"]),
    )
    row(
        f"  p50 after the first {WARM_SKIP} (each pooled connection's statements prepared)",
        f"{f.warm_p50_ms:.1f} ms",
    )
    row(
        "submit -> run finished, p99",
        f"{f.p99_ms:.1f} ms (p90 {f.p90_ms:.1f}, max {f.max_ms:.1f})",
        f"<= {g['p99_ms']:.0f} ms",
        _ok(f.p99_ms <= g["p99_ms"]),
    )
    if f.hot_samples:
        row(
            f"  fresh waits answered within park_after ({f.hot_samples}): p50 / p99",
            f"{f.hot_p50_ms:.1f} / {f.hot_p99_ms:.1f} ms",
            f"<= {g['p50_ms']:.0f} / {g['p99_ms']:.0f} ms",
            _ok(f.hot_p50_ms <= g["p50_ms"] and f.hot_p99_ms <= g["p99_ms"]),
        )
    row(
        "  WAL written per sequential resume (full-page images)",
        f"{f.wal_kb_per_resume:.1f} KB ({f.fpi_per_resume:.1f})",
    )
    row(
        "submit -> tool message recorded, p50 / p99",
        f"{f.tool_p50_ms:.1f} / {f.tool_p99_ms:.1f} ms",
    )
    row(
        f"burst of {f.burst}: drain rate (first submit -> last run finished)",
        f"{f.drain_per_s:.1f} sessions/s ({f.burst_done} in {f.drain_s:.1f} s)",
        f">= {g['drain_per_s']:.0f}/s",
        _ok(f.drain_per_s >= g["drain_per_s"]),
    )
    row("  all submits returned after", f"{f.submits_s:.1f} s")
    row("  worker CPU per resumed turn", f"{f.cpu_ms_per_turn:.1f} ms")
    if f.pg_cpu_ms_per_turn > 0:
        row(
            "  Postgres / bench client (submits, polling) CPU per turn",
            f"{f.pg_cpu_ms_per_turn:.1f} / {f.bench_cpu_ms_per_turn:.1f} ms",
        )
    row(
        "  WAL written per turn (full-page images)",
        f"{f.burst_wal_kb_per_turn:.1f} KB ({f.burst_fpi_per_turn:.1f})",
    )
    row("  host CPU busy during the burst (2 cores)", f"{f.burst_host_busy_pct:.0f} %")
    row(
        "  submit -> run finished in the burst, p50 / p99",
        f"{f.burst_p50_ms:.0f} / {f.burst_p99_ms:.0f} ms",
    )
    if f.burst_failed or f.failed_before_park:
        row(
            "[red]failures[/red]",
            f"{f.failed_before_park} before parking, {f.burst_failed} in the burst",
        )
    row("load average before / after", f"{f.load_avg_before} / {f.load_avg_after}")
    return out


def report(
    console: Console,
    f: Figures,
    snaps: list[Proc],
    errors: Counter[str],
    bad: dict[str, str],
    mem: dict[str, Any] | None,
    spy_dir: Path | None,
) -> None:
    t = rich_table(
        f"worker process over the run ({f.parked} parked sessions)",
        ("when", "VmRSS MB", "Threads", "worker CPU s", "PG conns"),
    )
    for s in snaps:
        t.add_row(s.label, f"{s.rss_mb:.1f}", str(s.threads), f"{s.cpu_s:.2f}", str(s.pg_conns))
    console.print(t)

    mode = "in memory" if f.park_after_s is None else f"parked after {f.park_after_s:g} s"
    g = rich_table(
        f"{f.parked} sessions waiting on a client tool in one worker ({mode})",
        ("figure", "value", "goal", "met"),
    )
    for row in _goal_rows(f):
        g.add_row(*row)
    console.print(g)
    for e, c in errors.items():
        console.print(f"[red]submit failed x{c}: {e}[/red]")
    if bad:
        console.print(f"[red]{len(bad)} burst runs ended badly: {Counter(bad.values())}[/red]")
    if mem:
        _memory_tables(console, mem)
    if spy_dir is not None:
        console.print(f"py-spy raw stacks of the burst: {spy_dir / 'burst.txt'}")


def _memory_tables(console: Console, mem: dict[str, Any]) -> None:
    n = mem["parked"]
    t = rich_table(
        f"gc-tracked objects added per parked session (top types, {n} parked)",
        ("type", "objects", "per session"),
    )
    for row in mem["gc_by_type"][:25]:
        t.add_row(row["type"], str(row["diff"]), f"{row['per_session']:.2f}")
    console.print(t)
    if "by_line" not in mem:
        return
    console.print(
        f"tracemalloc: +{mem['total_diff_kb'] / 1024:.1f} MB since launch"
        f" ({mem['total_diff_kb'] * 1024 / max(1, n) / 1024:.1f} KB per parked session);"
        " by package of the allocation site (KB): "
        + ", ".join(f"{k} {v:.0f}" for k, v in mem["by_package_of_allocation_site"].items())
    )
    for key, title in (
        (
            "by_innermost_library_frame",
            "allocations by innermost dbos_agents/dbos/SQLAlchemy/pydantic/psycopg frame",
        ),
        ("by_innermost_dbos_agents_frame", "allocations by innermost dbos_agents frame"),
        ("by_line", "allocations by allocation site (file:line)"),
    ):
        t = rich_table(title, ("where", "KB", "B / session"))
        for row in mem[key][:15]:
            t.add_row(row["where"], f"{row['kb']:.0f}", f"{row['bytes_per_session']:.0f}")
        console.print(t)
