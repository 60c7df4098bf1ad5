"""bench/recovery.py's result and its console report."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from _lib.tables import rich_table
from recovery_db import TERMINAL
from rich.console import Console

GOAL_SEC = 20.0
"""The goal (performance issue): after a restart all sessions finish within 20 s, with 0
duplicate effects."""


@dataclass
class Result:
    args: dict[str, Any]
    versions: dict[str, str]
    load_before: str
    enqueue_sec: float = 0.0
    first_run_sec: float = 0.0
    at_kill: dict[str, Any] = field(default_factory=dict)
    recovery: dict[str, Any] = field(default_factory=dict)
    final: dict[str, Any] = field(default_factory=dict)
    checks: dict[str, Any] = field(default_factory=dict)
    profile: dict[str, Any] | None = None
    load_after: str = ""


def _fmt(d: dict[str, Any]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in d.items()) or "-"


def report(res: Result, out: Console) -> None:
    n = res.args["sessions"]
    rec, chk, kill, fin = res.recovery, res.checks, res.at_kill, res.final
    done_at_kill = sum(v for k, v in kill["sessions"].items() if k in TERMINAL)
    completed = fin["sessions"].get("completed", 0)
    not_terminal = sum(v for k, v in fin["sessions"].items() if k not in TERMINAL)
    conc = res.args["worker_concurrency"] or "unlimited"
    t = rich_table(
        f"SIGKILL with {n} sessions in flight, restart, recover"
        f" ({res.args['turns']} tool turns + answer per session, worker concurrency {conc})",
        ("metric", "value"),
    )
    t.add_row("worker 1: spawn -> SIGKILL", f"{res.first_run_sec:.1f} s")
    t.add_row("at kill: finished / in flight", f"{done_at_kill} / {n - done_at_kill}")
    t.add_row("at kill: sessions", _fmt(kill["sessions"]))
    t.add_row("at kill: DBOS workflows", _fmt(kill["workflows"]))
    t.add_row("at kill: sessions by effects done", _fmt(kill["sessions_by_effects"]))
    t.add_row("at kill: effects recorded", str(kill["effects"]))
    t.add_row(
        "peak connections to the bench db (worker 1 / 2)",
        f"{kill['peak_connections']} / {rec['peak_connections']}",
    )
    t.add_row("worker 2: spawn -> imports done", f"{rec['spawn_to_imported_sec']:.2f} s")
    t.add_row("worker 2: imports -> launch() returned", f"{rec['imported_to_ready_sec']:.2f} s")
    over = ">" if rec["stuck"] else ""
    t.add_row(
        "[bold]restart (spawn) -> all finished[/]",
        f"[bold]{over}{rec['spawn_to_all_done_sec']:.2f} s[/] (goal {GOAL_SEC:.0f} s)",
    )
    t.add_row("DBOS launch -> all finished", f"{over}{rec['ready_to_all_done_sec']:.2f} s")
    t.add_row(
        "throughput (recovered sessions / s)",
        f"{rec['sessions_per_sec']:.1f} from spawn, {rec['sessions_per_sec_after_ready']:.1f}"
        " from launch",
    )
    t.add_row(
        "worker 2 CPU (all threads / event loop thread)",
        f"{rec['worker_cpu_sec']:.1f} s / {rec['worker_main_thread_cpu_sec']:.1f} s",
    )
    t.add_row("postgres backends CPU over the recovery", f"{rec['postgres_cpu_sec']:.1f} s")
    t.add_row("host CPU busy over the recovery", f"{rec['host_cpu_busy_pct']:.0f} %")
    t.add_row("[bold]duplicate effects[/]", f"[bold]{chk['duplicate_effects']}[/]")
    t.add_row(
        "durability errors (with effect)",
        f"{chk['durability_errors']} ({chk['durability_errors_with_effect']})",
    )
    t.add_row("completed calls without an effect", str(chk["completed_calls_without_effect"]))
    t.add_row("effects by worker pid", _fmt(chk["effects_by_pid"]))
    t.add_row("final sessions", _fmt(fin["sessions"]))
    t.add_row("final DBOS workflows", _fmt(fin["workflows"]))
    t.add_row(
        "failed / stuck sessions",
        f"{n - completed - not_terminal} / {not_terminal}" + (" (timeout)" if rec["stuck"] else ""),
    )
    t.add_row("load average before / after", f"{res.load_before} / {res.load_after}")
    out.print(t)
    if res.profile and "error" not in res.profile:
        _profile_tables(res.profile, out)
    elif res.profile:
        out.print(f"profile: {res.profile['error']}")
    for dump in rec["stall_dumps"]:
        out.print(f"stalled recovery, py-spy dump: {dump}")
    ok = (
        chk["duplicate_effects"] == 0
        and completed == n
        and rec["spawn_to_all_done_sec"] <= GOAL_SEC
    )
    out.print(
        f"goal (all finish within {GOAL_SEC:.0f} s of restart, 0 duplicates):"
        f" {'MET' if ok else 'NOT MET'}; logs in {rec['logs']}"
    )


def _profile_tables(profile: dict[str, Any], out: Console) -> None:
    titles = {
        "threads": "by thread",
        "offloaded": "by function run on an executor thread",
        "inclusive": "inclusive, by function",
        "self": "self, by function",
    }
    for kind, title in titles.items():
        pt = rich_table(
            f"py-spy on worker 2 ({profile['mode']}), {title},"
            f" share of {profile['samples']} samples",
            ("function (file)", "samples", "share"),
        )
        for name, c, share in profile[kind][: 12 if kind in ("threads", "offloaded") else 25]:
            pt.add_row(name, str(c), f"{100 * share:.1f} %")
        out.print(pt)
