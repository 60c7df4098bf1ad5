"""Sections of docs/benchmarks.md for the start, parked, recovery and concurrency benchmarks
(the live streams and chat UIs: bench/live_sections.py).

Kept apart from bench/all.py (which runs the benchmarks and writes the report) so each
file stays readable; every function turns one benchmark's JSON into markdown lines.
"""

from __future__ import annotations

from typing import Any

from _lib.labels import START_ROWS
from _lib.stats import pct_rounded as pct
from _lib.tables import md_table as table
from concurrency_report import HEADER, goal_rows, table_rows


def met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def start_section(res: dict[str, Any]) -> list[str]:
    """Start -> first model call and last step -> result(), against raw DBOS."""
    samples, cpu = res["samples_ms"], res["cpu_ms_per_session"]
    ours, raw = pct(samples["ours_start"], 50), pct(samples["raw_start"], 50)
    res_ours = pct(samples["ours_result"], 50)
    return [
        "## Start and result latency",
        "",
        f"One session at a time ({res['sessions']} per path), an agent that answers at once;"
        f" queue polling {res['queue_polling_interval_sec']} s (the raw enqueue row waits for it)."
        " A worker's own start (runtime.start) is claimed by its start transaction and runs"
        " as that commits; a start from another process (AgentClient.start) is"
        " announced by NOTIFY in the start transaction and claimed at once; the raw enqueue"
        " row waits for DBOS's poll. CPU is the process's CPU ms per session over the whole"
        " start-to-result path.",
        "",
        table(
            ("path (ms)", "n", "p50", "p90", "p99", "max", "CPU ms/session"),
            [
                (
                    label,
                    str(len(samples[key])),
                    *(f"{pct(samples[key], q):.1f}" for q in (50, 90, 99)),
                    f"{max(samples[key]):.1f}",
                    f"{cpu[ck]:.1f}" if ck else "",
                )
                for key, label, ck in START_ROWS
            ],
        ),
        "",
        f"Goals: start -> first model call p50 <= 20 ms: **{ours:.1f} ms** ({met(ours <= 20)};"
        f" {ours / raw:.2f}x a direct raw DBOS start, which skips the queue); last step ->"
        f" result() p50 <= 10 ms: **{res_ours:.1f} ms** ({met(res_ours <= 10)}).",
        "",
    ]


GOAL_PARKED = 10_000
"""The parked goals (RSS per session, submit -> resume p50 and p99) are set for this many
waiting sessions; a smaller run is shown but not judged against them (a baseline's growth
spread over fewer sessions weighs more per session)."""


def parked_section(f: dict[str, Any]) -> list[str]:
    """bench/parked.py: N sessions waiting in one worker, then a burst of submits."""
    at_size = f["parked"] >= GOAL_PARKED

    def judged(ok: bool) -> str:
        return met(ok) if at_size else f"n/a ({f['parked']} waiting)"

    rows = [
        (
            "time to park (first start -> last armed)",
            f"{f['park_s']:.1f} s ({f['park_rate']:.0f}/s, worker CPU {f['park_worker_cpu_s']:.1f} s)",
            "",
            "",
        ),
        (
            "RSS above the launch baseline per waiting session",
            f"{f['rss_kb_per_session']:.1f} KB",
            "<= 20 KB at 10,000",
            judged(f["rss_kb_per_session"] <= 20),
        ),
        (
            "OS threads: baseline / parked / max seen",
            f"{f['baseline_threads']} / {f['parked_threads']} / {f['max_threads']}",
            "<= 64",
            met(f["max_threads"] <= 64),
        ),
        (
            "Postgres connections of the worker: parked / max",
            f"{f['pg_conns_parked']} / {f['pg_conns_max']}",
            "",
            "",
        ),
        (
            "worker CPU while parked and idle",
            f"{f['idle_cpu_pct']:.1f} % of a core (before parking {f['base_idle_cpu_pct']:.1f} %)",
            "",
            "",
        ),
        (
            f"submit -> run finished p50 ({f['samples']} sequential)",
            f"{f['p50_ms']:.1f} ms",
            "<= 20 ms at 10,000",
            judged(f["p50_ms"] <= 20),
        ),
        (
            "submit -> run finished p99",
            f"{f['p99_ms']:.1f} ms",
            "<= 100 ms at 10,000",
            judged(f["p99_ms"] <= 100),
        ),
        (
            f"burst of {f['burst']} submits: drain rate",
            f"{f['drain_per_s']:.1f} sessions/s",
            ">= 60/s",
            met(f["drain_per_s"] >= 60),
        ),
        ("burst: worker CPU per resumed turn", f"{f['cpu_ms_per_turn']:.1f} ms", "", ""),
    ]
    return [
        "## Parked sessions and a burst of submits",
        "",
        f"`bench/parked.py`: {f['parked']} sessions wait on a client tool in one worker"
        " process (measured from `/proc`, apart from the driver that plays the API server);"
        " then sequential submits while they all wait, then a burst of concurrent submits."
        + (
            " Every wait stays in memory (`park_after_sec` None)."
            if f["park_after_s"] is None
            else f" Waits park after {f['park_after_s']:g} s (`park_after_sec`): the submits"
            " resume parked sessions, by replay."
        )
        + " See docs/bench-notes/parked.md for the 10,000-session run and the profiles.",
        "",
        table(("figure", "value", "goal", "met"), [tuple(r) for r in rows]),
        "",
    ]


def parking_section(parked: dict[str, Any], in_memory: dict[str, Any]) -> list[str]:
    """The same bench with every wait kept in memory: what parking costs and saves."""

    def ratio(key: str) -> str:
        return f"{parked[key] / in_memory[key]:.2f}x" if in_memory[key] else "-"

    rows = [
        (label, f"{in_memory[k]:{fmt}}", f"{parked[k]:{fmt}}", ratio(k))
        for label, k, fmt in (
            ("RSS per waiting session (KB)", "rss_kb_per_session", ".1f"),
            ("submit -> run finished p50 (ms)", "p50_ms", ".1f"),
            ("submit -> run finished p99 (ms)", "p99_ms", ".1f"),
            ("burst drain (sessions/s)", "drain_per_s", ".1f"),
            ("worker CPU per resumed turn (ms)", "cpu_ms_per_turn", ".1f"),
        )
    ]
    return [
        "### Parked or kept in memory",
        "",
        "The same run of `bench/parked.py` with `--park-after never`: every wait stays a"
        " suspended workflow in memory. Parking trades memory for the replay a resume"
        f' pays ({parked["parked"]} sessions; docs/architecture.md, "Parked waits").',
        "",
        table(("figure", "in memory", "parked", "parked / in memory"), [tuple(r) for r in rows]),
        "",
    ]


def recovery_section(r: dict[str, Any]) -> list[str]:
    """bench/recovery.py: SIGKILL a worker with N sessions in flight, restart, recover."""
    n = r["args"]["sessions"]
    rec, chk, kill = r["recovery"], r["checks"], r["at_kill"]
    terminal = {"completed", "failed", "max_turns", "budget_exhausted", "interrupted"}
    done = sum(v for k, v in kill["sessions"].items() if k in terminal)
    total = rec["spawn_to_all_done_sec"]
    rows = [
        ("in flight at the SIGKILL", f"{n - done} of {n}", "", ""),
        ("restart (spawn) -> all finished", f"{total:.1f} s", "<= 20 s", met(total <= 20)),
        ("recovered sessions / s", f"{rec['sessions_per_sec']:.1f}", "", ""),
        ("worker CPU over the recovery (all threads)", f"{rec['worker_cpu_sec']:.1f} s", "", ""),
        ("Postgres CPU over the recovery", f"{rec['postgres_cpu_sec']:.1f} s", "", ""),
        (
            "duplicate effects",
            str(chk["duplicate_effects"]),
            "0",
            met(chk["duplicate_effects"] == 0),
        ),
        (
            "durability errors (the model told the outcome is unknown)",
            str(chk["durability_errors"]),
            "",
            "",
        ),
    ]
    return [
        "## Recovery after SIGKILL",
        "",
        f"`bench/recovery.py`: {n} sessions ({r['args']['turns']} side-effecting tool turns and"
        " an answer each) on a private Postgres cluster; the worker is SIGKILLed with most in"
        " flight and restarted with the same executor id. See docs/bench-notes/recovery.md.",
        "",
        table(("figure", "value", "goal", "met"), [tuple(r) for r in rows]),
        "",
        f"The restarted worker is CPU-bound in one process (one core under the GIL):"
        f" {rec['worker_cpu_sec']:.0f} s of worker CPU for {n - done} sessions.",
        "",
    ]


def concurrency_section(res: dict[str, Any] | None) -> list[str]:
    """bench/concurrency.py: N sessions at once on ours and the peers; "not measured" for a
    run that predates it (an older results.json)."""
    out = ["## Concurrency", ""]
    if res is None:
        return [*out, "Not measured in this run (`python bench/concurrency.py`).", ""]
    a = res["args"]
    stm = res["statements"]
    out += [
        f"`bench/concurrency.py`: N sessions started at once, {a['turns']} turns each (a"
        " side-effecting tool call per turn, then an answer), the scripted model sleeping the"
        " given ms per call (`asyncio.sleep`). Each system runs in its own process on its own"
        f" fresh database, one configuration at a time, in {a['rounds']} alternated round(s)"
        " (ours first in odd rounds); figures are the medians of the rounds, session times"
        " pooled over them. turns/s is tool turns / (first start -> last session end); CPU is"
        " the system's process (all threads) over that window, PG CPU the Postgres backends"
        " serving its database (sampled from /proc every 200 ms); xacts are"
        " pg_stat_database's commits + rollbacks; new conns the connections opened during the"
        ' window. Ours alone at 1 session is the baseline of "x 1 session". See'
        " docs/bench-notes/concurrency.md.",
        "",
        table(HEADER, table_rows(res), right_from=1),
        "",
        table(("figure", "value", "goal", "met"), goal_rows(res["rows"])),
        "",
    ]
    if not stm["available"]:
        out += [f"Statements per turn: not measured ({stm['reason']}).", ""]
        return out
    top = max((r for r in res["rows"] if r.get("top_statements")), default=None,
              key=lambda r: (r["sessions"], -r["model_ms"]))  # fmt: skip
    if top is not None:
        n, ms = top["sessions"], top["model_ms"]
        body = [
            (res["labels"].get(r["system"], r["system"]), f"`{s['query'][:100]}`",
             str(s["calls"]), f"{s['total_ms']:.0f}")
            for r in res["rows"]
            if (r["sessions"], r["model_ms"]) == (n, ms) and r.get("top_statements")
            for s in r["top_statements"][:5]
        ]  # fmt: skip
        out += [
            f"Top statements by total time at {n} sessions, {ms:g} ms (pg_stat_statements):",
            "",
            table(("system", "statement", "calls", "total ms"), body, right_from=2),
            "",
        ]
    return out


def models_section(res: dict[str, Any] | None) -> list[str]:
    """bench/models.py: the two adapters per turn, and each one's CPU per streamed piece."""
    if res is None:
        return ["## Model adapters", "", "Not measured (`python bench/models.py`).", ""]
    turn = res["per_turn"]["ratio"]
    body = [(p, f"{v['sdk_us']:.1f}", f"{v['adapter_us']:.1f}", f"{v['ratio']:.2f}x",
             met(v["ratio"] <= 1.2)) for p, v in res["per_piece"].items()]  # fmt: skip
    return [
        "## Model adapters",
        "",
        f"`bench/models.py` (fake servers in processes of their own, the same streamed"
        f" replies; medians of {res['sizes']['rounds']} alternated rounds): per turn through"
        f" a worker, Anthropic / OpenAI **{turn:.2f}x** (goal <= 1.10x: {met(turn <= 1.1)});"
        " CPU per streamed piece against the SDK's own stream loop (goal <= 1.20x) below."
        " See docs/bench-notes/models.md.",
        "",
        table(("provider", "SDK us/piece", "adapter us/piece", "ratio", "met"), body),
        "",
    ]
