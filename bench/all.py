"""Every benchmark in one command: runs them, writes docs/benchmarks.md and its PNG plots.

    pip install -e '.[bench]' && python bench/all.py [--quick] [--server-url URL]
        [--sessions N] [--peer-sessions N] [--turns N] [--rounds N] [--sequential N]
        [--raw N] [--note TEXT] [--no-peers] [--out docs/benchmarks.md]

Each benchmark runs in its own subprocess, because DBOS is a process singleton (one launch
per process, one system database), and on a fresh database of the given server, because
DBOS would recover leftover workflows of an earlier run and measure those too:

1. bench/turn_overhead.py --json: dbos-agents ms per turn against two raw-DBOS floors
   (2 async steps; 2 steps + 2 datasource transactions), interleaved in one process.
2. bench/peers/run.py --json: Pydantic AI + DBOS and LangGraph + AsyncPostgresSaver on the
   same scripted conversation, plus a raw-DBOS 2-step floor in the Pydantic AI process (it
   creates its own fresh databases and its own venv, bench/peers/.venv). 1 and 2 run in
   ``--rounds`` alternated rounds (default 3): ours and LangGraph's default are close
   enough that one run's order and noise decide which is faster.
3. bench/submit_latency.py --json --concurrent 0: sequential client-tool submit -> resume
   latency against a raw DBOS ``recv`` woken by ``send``, interleaved in one process.

Every ratio in the report divides by a floor measured in the same run (on the same machine,
at the same load), never by a number from another day: on a shared machine absolute
milliseconds move with the load, ratios much less. Tests never assert on wall-clock time;
this is where the timings live.

The report records the date, the machine (CPU, RAM, load average before and after), the
Python and Postgres versions, every package version and the exact command, so a number is
never quoted without what produced it. The raw results go to docs/benchmarks/results.json
next to the plots. Default sizes take about two minutes on an idle 2-core machine;
``--quick`` is a ~30 s smoke run. matplotlib is the optional extra ``bench``, never a
runtime dependency of dbos-agents.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from sections import parked_section, parking_section, recovery_section, start_section

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
PY = sys.executable

TURN_DB = "dbos_agents_bench_all_turns"
SUBMIT_DB = "dbos_agents_bench_all_submit"
START_DB = "dbos_agents_bench_all_start"
PARKED_DB = "dbos_agents_bench_all_parked"
OURS = "dbos-agents: model turn + side-effecting tool call"  # row labels in turn_overhead.py
MIX = "raw DBOS: 2 steps + 2 datasource tx"
LANGGRAPH = "LangGraph + AsyncPostgresSaver (default durability)"  # row label in peers
PRIMARY = "submit -> run finished (workflow_status.updated_at)"  # submit_latency.py metrics
TOOL_MSG = "submit -> tool message recorded (next model step began its write)"
SUBMIT_CALL = "submit call itself (client.submit_tool_result)"
RAW_PRIMARY = "send -> workflow finished (workflow_status.updated_at)"
RAW_CALL = "send call itself (DBOSClient.send)"


@dataclass(frozen=True)
class Sizes:
    """How much each benchmark measures (after its own warm-up)."""

    sessions: int  # turn_overhead: sessions per path
    peer_sessions: int  # peers: sessions per system
    turns: int  # tool-calling turns per session, the same for ours and the peers
    sequential: int  # submit_latency: sequential sessions
    raw: int  # submit_latency: raw-DBOS recv/send iterations
    starts: int  # start_latency: sessions per path
    parked: int  # parked: sessions waiting in one worker
    burst: int  # parked: submits at once
    recovery: int  # recovery: sessions in flight at the SIGKILL
    rounds: int  # turn_overhead and the peers, alternated this many times


DEFAULT = Sizes(
    sessions=30, peer_sessions=30, turns=10, sequential=300, raw=100, starts=200,
    parked=2000, burst=1000, recovery=1000, rounds=3,
)  # fmt: skip
QUICK = Sizes(
    sessions=5, peer_sessions=3, turns=10, sequential=30, raw=10, starts=20,
    parked=200, burst=100, recovery=100, rounds=1,
)  # fmt: skip


class BenchFailed(RuntimeError):
    """A benchmark subprocess failed or printed no JSON; carries its stderr tail."""


def require_matplotlib() -> None:
    """Fail before minutes of benchmarking, not after, when the plots cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(
            "bench/all.py needs matplotlib for the plots, which is not a dependency of"
            " dbos-agents itself.\nInstall the bench extra:  pip install -e '.[bench]'"
        )


# ---------------------------------------------------------------------------- running


def run_json(label: str, cmd: Sequence[str], timeout: float) -> list[dict[str, Any]]:
    """Run one benchmark subprocess; return the JSON objects it printed, one per line."""
    print(f"[bench/all] {label}: {shlex.join(cmd)}", file=sys.stderr, flush=True)
    env = {k: v for k, v in os.environ.items() if k != "DBOS_AGENTS_DATABASE_URL"}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=timeout)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not rows:
        tail = "\n".join(proc.stderr.splitlines()[-40:])
        raise BenchFailed(f"{label} exited {proc.returncode} with {len(rows)} results:\n{tail}")
    print(f"[bench/all] {label}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    return rows


def on_fresh_database(server_url: str, name: str, label: str, argv: list[str]) -> dict[str, Any]:
    """Run ``argv + --database-url <fresh db>`` and drop the database afterwards."""
    from dbos_agents.testing import create_fresh_database, drop_database

    url = create_fresh_database(server_url, name)
    try:
        return run_json(label, [*argv, "--database-url", url], timeout=1800)[-1]
    finally:
        drop_database(server_url, name)


def _median(xs: Sequence[float]) -> float:
    return statistics.median(xs)


def merge_rounds(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per system over the rounds: the median of the rounds' medians and p90s (each
    round is a process of its own, with its own floor); samples, where a script gives them,
    pooled; ``rounds_ms`` keeps each round's median."""
    out = []
    for first in rounds[0]:
        same = [next(r for r in rnd if r["system"] == first["system"]) for rnd in rounds]
        row = {**first}
        row["ms_per_turn_median"] = _median([r["ms_per_turn_median"] for r in same])
        row["ms_per_turn_p90"] = _median([r["ms_per_turn_p90"] for r in same])
        row["rounds_ms"] = [r["ms_per_turn_median"] for r in same]
        if "samples_ms_per_turn" in first:
            row["samples_ms_per_turn"] = [x for r in same for x in r["samples_ms_per_turn"]]
        out.append(row)
    return out


def run_all(server_url: str, sizes: Sizes, peers: bool) -> dict[str, Any]:
    """The benchmarks, one after the other, each in its own process; ms per turn (ours and
    the peers) in ``sizes.rounds`` alternated rounds, every other one with the peers first,
    so neither side always runs on a warmer or a busier machine."""
    turn_rounds: list[dict[str, Any]] = []
    peer_rounds: list[list[dict[str, Any]]] = []

    def ours(i: int) -> None:
        turn_rounds.append(
            on_fresh_database(
                server_url,
                TURN_DB,
                f"1/6 turn_overhead (round {i + 1}/{sizes.rounds})",
                [
                    *(PY, "bench/turn_overhead.py", "--json"),
                    *("--sessions", str(sizes.sessions), "--turns", str(sizes.turns)),
                ],
            )
        )

    def theirs(i: int) -> None:
        peer_rounds.append(
            run_json(
                f"2/6 peers (round {i + 1}/{sizes.rounds})",
                [
                    *(PY, "bench/peers/run.py", "--json", "--server-url", server_url),
                    *("--sessions", str(sizes.peer_sessions), "--turns", str(sizes.turns)),
                ],
                timeout=3600,
            )
        )

    for i in range(sizes.rounds):
        order = (ours, theirs) if i % 2 == 0 or not peers else (theirs, ours)
        for run in order:
            if peers or run is ours:
                run(i)
    turn = {**turn_rounds[0], "rows": merge_rounds([t["rows"] for t in turn_rounds])}
    peer_rows = merge_rounds(peer_rounds) if peers else []
    submit = on_fresh_database(
        server_url,
        SUBMIT_DB,
        "3/6 submit_latency",
        [
            *(PY, "bench/submit_latency.py", "--json", "--concurrent", "0"),
            *("--handle-samples", "0", "--sequential", str(sizes.sequential)),
            *("--raw", str(sizes.raw)),
        ],
    )
    starts = on_fresh_database(
        server_url,
        START_DB,
        "4/6 start_latency",
        [*(PY, "bench/start_latency.py", "--json", "--sessions", str(sizes.starts))],
    )

    def parked_bench(label: str, *extra: str) -> dict[str, Any]:
        return on_fresh_database(
            server_url,
            PARKED_DB,
            label,
            [
                *(PY, "bench/parked.py", "--json", "--sessions", str(sizes.parked)),
                *("--burst", str(sizes.burst), "--samples", str(min(300, sizes.parked // 4))),
                *("--start-wave", "500", "--idle", "5", *extra),
            ],
        )

    parked = parked_bench("5/6 parked")
    in_memory = parked_bench("5b/6 parked, waits kept in memory", "--park-after", "never")
    recovery = run_json(
        "6/6 recovery",
        [
            *(PY, "bench/recovery.py", "--json", "--private-cluster"),
            *("--sessions", str(sizes.recovery)),
        ],
        timeout=1800,
    )[-1]
    return {
        "turn_overhead": turn,
        "peers": peer_rows,
        "rounds": sizes.rounds,
        "submit_latency": submit,
        "start_latency": starts,
        "parked": parked,
        "in_memory": in_memory,
        "recovery": recovery,
    }


# ---------------------------------------------------------------------------- machine


def _first(path: str, key: str) -> str | None:
    """Value of the first ``key: value`` line of a /proc file (None off Linux)."""
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == key:
                    return v.strip()
    except OSError:
        return None
    return None


def loadavg() -> str:
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "n/a"


def postgres_version(server_url: str) -> str:
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(server_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), connect_timeout=10) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "unknown"


def machine(server_url: str) -> dict[str, str]:
    """What the numbers were measured on; the CPU and load matter more than anything else."""
    from sqlalchemy.engine import make_url

    mem_kb = _first("/proc/meminfo", "MemTotal")
    cpus = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cpus
    return {
        "CPU": f"{_first('/proc/cpuinfo', 'model name') or platform.processor() or 'unknown'}"
        f", {cpus} logical CPUs ({usable} usable by this process)",
        "RAM": f"{int(mem_kb.split()[0]) / 1024 / 1024:.1f} GiB" if mem_kb else "unknown",
        "OS": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "Postgres": f"{postgres_version(server_url)} at"
        f" {make_url(server_url).render_as_string(hide_password=True)}",
    }


def busy_note(load_before: str, note: str | None) -> str | None:
    """The user's note, plus a warning when the 1-minute load already exceeded half the CPUs
    at the start: absolute milliseconds are then inflated (the ratios much less so)."""
    try:
        load1 = float(load_before.split()[0])
    except (ValueError, IndexError):
        return note
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    if load1 <= 0.5 * (cpus or 1):
        return note
    warning = (
        f"The machine was busy: 1-minute load average {load1:.2f} on {cpus} CPUs when the run"
        " started, so absolute milliseconds are inflated; compare ratios, not milliseconds."
    )
    return f"{note} {warning}" if note else warning


def pkg_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


# ---------------------------------------------------------------------------- numbers


def pct(xs: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100), as bench/submit_latency.py computes it."""
    s = sorted(xs)
    return s[max(0, min(len(s) - 1, math.ceil(q / 100 * len(s)) - 1))]


@dataclass(frozen=True)
class TurnRow:
    system: str
    source: str  # which process measured it: "turn_overhead" or "peers"
    median: float
    p90: float
    samples: list[float]  # per-session ms/turn; empty for the peers (they report summaries)
    floor: bool
    rounds_ms: list[float]  # each round's median (one entry when not run in rounds)


def turn_rows(results: dict[str, Any]) -> list[TurnRow]:
    rows = [
        TurnRow(
            r["system"],
            "turn_overhead",
            r["ms_per_turn_median"],
            r["ms_per_turn_p90"],
            r["samples_ms_per_turn"],
            r["floor"],
            r.get("rounds_ms", [r["ms_per_turn_median"]]),
        )
        for r in results["turn_overhead"]["rows"]
    ]
    rows += [
        TurnRow(
            r["system"],
            "peers",
            r["ms_per_turn_median"],
            r["ms_per_turn_p90"],
            [],
            r["floor"],
            r.get("rounds_ms", [r["ms_per_turn_median"]]),
        )
        for r in results["peers"]
    ]
    return sorted(rows, key=lambda r: r.median)


def floor_of(rows: list[TurnRow], source: str) -> float | None:
    return next((r.median for r in rows if r.floor and r.source == source), None)


def ratio(x: float, floor: float | None) -> str:
    return f"{x / floor:.2f}" if floor else "-"


# ---------------------------------------------------------------------------- plots


def plot_turns(rows: list[TurnRow], floors: dict[str, float | None], path: Path) -> None:
    """Bars at the median, a whisker to p90, and our per-session samples as dots."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colors = {"turn_overhead": "tab:blue", "peers": "tab:orange"}
    fig, ax = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.8))
    ys = list(range(len(rows)))
    ax.barh(
        ys,
        [r.median for r in rows],
        xerr=[[0.0] * len(rows), [max(0.0, r.p90 - r.median) for r in rows]],
        color=[colors[r.source] for r in rows],
        alpha=0.75,
        capsize=3,
    )
    for y, r in zip(ys, rows, strict=True):
        if r.samples:
            ax.scatter(r.samples, [y] * len(r.samples), s=9, color="black", alpha=0.5, zorder=3)
    for (source, floor), style in zip(floors.items(), ("--", ":"), strict=False):
        if floor:
            ax.axvline(floor, color=colors[source], ls=style, lw=1, label=f"floor ({source})")
    ax.set_yticks(ys, [f"{r.system}  [{r.source}]" for r in rows], fontsize=8)
    ax.set_xlabel("ms per turn (bar: median, whisker: p90, dots: per-session samples)")
    ax.set_title("ms per turn, same scripted conversation, same run")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_submit(samples: dict[str, list[float]], path: Path) -> None:
    """Histogram (log bins) and CDF of submit -> resume next to the raw recv/send floor."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (hist, cdf) = plt.subplots(1, 2, figsize=(11, 4))
    every = [x for xs in samples.values() for x in xs if x > 0] or [1.0]
    lo, hi = max(0.1, min(every)), max(every)
    bins = np.geomspace(lo, hi * 1.01, 40)
    for label, xs in samples.items():
        pos = sorted(x for x in xs if x > 0)  # log axis; clock skew could make one <= 0
        if not pos:
            continue
        hist.hist(pos, bins=bins, alpha=0.5, label=label)
        fractions = [0.0] + [(i + 1) / len(pos) for i in range(len(pos))]
        cdf.step([pos[0], *pos], fractions, where="post", label=label)
    for ax in (hist, cdf):
        ax.set_xscale("log")
        ax.set_xlabel("ms after the submit (log scale)")
    hist.set_ylabel("samples")
    cdf.set_ylabel("fraction of samples")
    cdf.set_ylim(0, 1.02)
    cdf.axhline(0.5, color="grey", lw=0.5)
    cdf.axhline(0.99, color="grey", lw=0.5)
    hist.legend(fontsize=7)
    fig.suptitle("client-tool submit -> resume (sequential), with the raw-DBOS floor")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


# ---------------------------------------------------------------------------- report


def table(header: Sequence[str], body: Sequence[Sequence[str]], right_from: int = 1) -> str:
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(align) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in body]
    return "\n".join(lines)


def rounds_table(rows: list[TurnRow], rounds: int) -> list[str]:
    """Each round's medians side by side, and ours against LangGraph's default, round by
    round: the two are within noise of each other, so one run settles nothing."""
    if rounds < 2 or not any(r.source == "peers" for r in rows):
        return []
    shown = sorted(rows, key=lambda r: (r.floor, r.source != "turn_overhead", r.median))
    ours = next(r for r in rows if r.system == OURS)
    lg = next((r for r in rows if r.system == LANGGRAPH), None)
    body = []
    for i in range(rounds):
        line = [str(i + 1), *(f"{r.rounds_ms[i]:.2f}" for r in shown)]
        if lg is not None:
            line.append(f"{ours.rounds_ms[i] / lg.rounds_ms[i]:.2f}")
        body.append(line)
    out = [
        f"Round by round ({rounds} rounds, alternated: every other round ran the peers first;"
        " the table above shows the median of the rounds' medians), ms per turn:",
        "",
        table(
            (
                "round",
                *(f"{r.system} [{r.source}]" for r in shown),
                *(["dbos-agents / LangGraph default"] if lg is not None else []),
            ),
            body,
        ),
        "",
    ]
    if lg is not None:
        faster = sum(o < x for o, x in zip(ours.rounds_ms, lg.rounds_ms, strict=True))
        out += [
            f"dbos-agents was faster per turn than LangGraph + AsyncPostgresSaver (default"
            f" durability) in **{faster} of {rounds}** rounds.",
            "",
        ]
    return out


def report(
    results: dict[str, Any],
    *,
    command: str,
    sizes: Sizes,
    started: dt.datetime,
    wall_s: float,
    host: dict[str, str],
    load: tuple[str, str],
    note: str | None,
    img_dir: str,
) -> str:
    """The markdown of docs/benchmarks.md."""
    rows = turn_rows(results)
    floor_a = floor_of(rows, "turn_overhead")
    assert floor_a is not None, "bench/turn_overhead.py always measures its floor"
    floor_b = floor_of(rows, "peers")
    sub = results["submit_latency"]
    seq, raw = sub["samples_ms"]["sequential"], sub["samples_ms"]["raw"]
    raw_p50 = pct(raw[RAW_PRIMARY], 50)
    ours = next(r for r in rows if r.system == OURS)
    mix = next(r for r in rows if r.system == MIX)

    versions: dict[str, str] = {
        "dbos": pkg_version("dbos"),
        "dbos-agents": pkg_version("dbos-agents"),
        "matplotlib": pkg_version("matplotlib"),
    }
    peer_versions: dict[str, str] = {}
    for r in results["peers"]:
        peer_versions.update(r["versions"])

    out = [
        "# Benchmarks",
        "",
        f"Generated by `{command}` on {started:%Y-%m-%d %H:%M} UTC in {wall_s:.0f} s"
        " (do not edit by hand: rerun the command). Every ratio divides by a floor measured in"
        " the same run, so it compares like with like on whatever the machine was doing;"
        " tests never assert on wall-clock time. Raw results: "
        f"[`{img_dir}/results.json`]({img_dir}/results.json).",
        "",
    ]
    if note:
        out += [f"> **Note.** {note}", ""]
    out += [
        "## Machine",
        "",
        table(
            ("", ""),
            [
                *host.items(),
                ("Load average (1/5/15 min)", f"{load[0]} before, {load[1]} after"),
            ],
            right_from=2,
        ),
        "",
        "## Versions",
        "",
        table(
            ("package", "version", "where"),
            [(k, v, "this venv") for k, v in versions.items()]
            + [(k, v, "bench/peers/.venv") for k, v in sorted(peer_versions.items())],
            right_from=3,
        ),
        "",
        "## Command and sizes",
        "",
        "```",
        command,
        "```",
        "",
        f"turn_overhead: {sizes.sessions} sessions per path; peers: {sizes.peer_sessions} sessions"
        f" per system, in {sizes.rounds} alternated round(s); both {sizes.turns} tool-calling turns + an answer per session, after one"
        f" warm-up session. submit_latency: {sizes.sequential} sequential sessions interleaved"
        f" with {sizes.raw} raw recv/send iterations, after one warm-up of each.",
        "",
        "## ms per turn",
        "",
        "One turn is one model call plus one side-effecting tool call (scripted model, no"
        " network). Agent systems: session wall time / model calls (turns + 1); raw-DBOS rows:"
        " wall time / turns. Two raw-DBOS 2-step floors were measured in this run:"
        " **floor A** in bench/turn_overhead.py's process"
        f" ({floor_a:.2f} ms)"
        + (
            f" and **floor B** in the peers' Pydantic AI process ({floor_b:.2f} ms)"
            if floor_b
            else ""
        )
        + ". Each row's headline ratio uses the"
        " floor from its own process (A for turn_overhead rows, B for peers rows); the other"
        " column is there to show how far apart the two floors are.",
        "",
        table(
            ("system", "measured in", "median ms", "p90 ms", "x floor A", "x floor B"),
            [
                (
                    f"**{r.system}**" if r.system == OURS else r.system,
                    r.source,
                    f"{r.median:.2f}",
                    f"{r.p90:.2f}",
                    ratio(r.median, floor_a),
                    ratio(r.median, floor_b),
                )
                for r in rows
            ],
            right_from=2,
        ),
        "",
        f"Headline: dbos-agents is **{ratio(ours.median, floor_a)}x** the raw-DBOS 2-step floor"
        f" (floor A) and {ratio(ours.median, mix.median)}x the same-mix floor ({mix.system},"
        " i.e. what dbos-agents' own code adds on top of DBOS doing the same writes)"
        + "".join(
            f"; {r.system} is {ratio(r.median, floor_b)}x (floor B)"
            for r in rows
            if r.source == "peers" and not r.floor
        )
        + ".",
        "",
        *rounds_table(rows, results.get("rounds", 1)),
        f"![ms per turn per system]({img_dir}/ms_per_turn.png)",
        "",
        "## Client-tool submit -> resume",
        "",
        "Sequential: one session at a time waits in a client tool, is armed in `recv`, and is"
        ' submitted to through `AgentClient.submit_tool_result`; "resumed" means DBOS recorded'
        " the run's outcome (`workflow_status.updated_at`), which includes the wake-up, the tool"
        " result write, one more model turn and the run's end. The floor is a raw DBOS workflow"
        " in `recv_async` woken by `DBOSClient.send`, interleaved with it in the same process.",
        "",
        table(
            ("metric (ms)", "n", "p50", "p90", "p99", "max", "p50 x floor"),
            [
                (
                    name,
                    str(len(xs)),
                    *(f"{pct(xs, q):.1f}" for q in (50, 90, 99)),
                    f"{max(xs):.1f}",
                    ratio(pct(xs, 50), raw_p50) if vs_floor else "",
                )
                for name, xs, vs_floor in (
                    (f"**dbos-agents: {PRIMARY}**", seq[PRIMARY], True),
                    (f"dbos-agents: {TOOL_MSG}", seq[TOOL_MSG], True),
                    (f"dbos-agents: {SUBMIT_CALL}", seq[SUBMIT_CALL], False),
                    (f"raw DBOS floor: {RAW_PRIMARY}", raw[RAW_PRIMARY], True),
                    (f"raw DBOS floor: {RAW_CALL}", raw[RAW_CALL], False),
                )
            ],
        ),
        "",
        f"Headline: submit -> resume p50 is **{ratio(pct(seq[PRIMARY], 50), raw_p50)}x** the raw"
        " DBOS send -> recv floor's p50 measured alongside it."
        + (
            f" With {len(seq[PRIMARY])} samples p99 is close to the maximum; a larger"
            " `--sequential` gives a meaningful tail."
            if len(seq[PRIMARY]) < 200
            else ""
        ),
        "",
        f"![submit -> resume latency]({img_dir}/submit_resume.png)",
        "",
        *start_section(results["start_latency"]),
        *parked_section(results["parked"]["figures"]),
        *parking_section(results["parked"]["figures"], results["in_memory"]["figures"]),
        *recovery_section(results["recovery"]),
        "## What each benchmark is",
        "",
        "- `bench/turn_overhead.py`: dbos-agents' durable loop (a model step that records the"
        " turn and the previous results in one transaction, then a tool step) against raw DBOS workflows doing 2 steps per turn, and 2"
        " steps + 2 datasource transactions per turn, interleaved session by session.",
        "- `bench/peers/run.py`: the same conversation on other durable agent stacks, each in"
        " its own process and database under bench/peers/.venv:",
        *(f"  - {r['system']}: {r['measures']}" for r in results["peers"]),
        "- `bench/submit_latency.py --concurrent 0`: the sequential section and the raw floor"
        " (run it alone for the 1,000-waiting-sessions section and `await handle.result()`).",
        "- `bench/start_latency.py`: a one-turn session at a time, started in the worker and"
        " through `AgentClient`, interleaved with raw DBOS starts (direct and enqueued).",
        "- `bench/parked.py`: many sessions waiting on a client tool in one worker process"
        " (RSS, threads, connections), submits while they wait, then a burst; run twice,"
        " with the default `park_after_sec` and with `--park-after never`.",
        "- `bench/recovery.py`: SIGKILL a worker with sessions in flight on a private"
        " cluster, restart it, count duplicate effects.",
        "- `bench/http_submit.py` (HTTP submit throughput through `dbos-agents serve`) needs a"
        " worker and a server process and is run on its own.",
        "",
    ]
    return "\n".join(out)


# ---------------------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--server-url",
        default=os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", DEFAULT_SERVER),
        help="any database URL on the Postgres server; fresh databases are created there",
    )
    p.add_argument("--quick", action="store_true", help="~30 s smoke run (tiny sizes)")
    for name, help_ in (
        ("sessions", "turn_overhead sessions per path"),
        ("peer-sessions", "peers: sessions per system"),
        ("turns", "tool-calling turns per session (ours and the peers)"),
        ("sequential", "submit_latency: sequential sessions"),
        ("raw", "submit_latency: raw-DBOS floor iterations"),
        ("starts", "start_latency: sessions per path"),
        ("parked", "parked: sessions waiting in one worker"),
        ("burst", "parked: submits at once"),
        ("recovery", "recovery: sessions in flight at the SIGKILL"),
        ("rounds", "ms per turn: alternated rounds of ours and the peers"),
    ):
        p.add_argument(f"--{name}", type=int, help=f"{help_} (default: see Sizes)")
    p.add_argument("--no-peers", action="store_true", help="skip bench/peers (no peers venv)")
    p.add_argument("--note", help="a note for the report, e.g. what else the machine was doing")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the markdown report to write")
    p.add_argument(
        "--render-only",
        action="store_true",
        help="measure nothing: rewrite the report and plots from the last run's results.json",
    )
    args = p.parse_args()
    require_matplotlib()
    if args.render_only:
        render_saved(args.out.resolve())
        return

    base = QUICK if args.quick else DEFAULT
    sizes = Sizes(
        **{
            k: (getattr(args, k) if getattr(args, k) is not None else v)
            for k, v in asdict(base).items()
        }
    )
    if min(asdict(sizes).values()) < 1:
        p.error("every size must be at least 1")
    out: Path = args.out.resolve()
    img_dir = out.parent / out.stem
    img_dir.mkdir(parents=True, exist_ok=True)
    try:
        script = Path(sys.argv[0]).resolve().relative_to(Path.cwd())
    except ValueError:
        script = Path(sys.argv[0])
    command = shlex.join(["python", str(script), *sys.argv[1:]])

    started = dt.datetime.now(dt.UTC)
    load_before = loadavg()
    host = machine(args.server_url)
    t0 = time.perf_counter()
    try:
        results = run_all(args.server_url, sizes, peers=not args.no_peers)
    except BenchFailed as exc:
        sys.exit(f"[bench/all] {exc}")
    wall = time.perf_counter() - t0
    load_after = loadavg()
    note = busy_note(load_before, args.note)

    meta = {
        "command": command,
        "started_utc": started.isoformat(timespec="seconds"),
        "wall_s": round(wall, 1),
        "sizes": asdict(sizes),
        "machine": host,
        "loadavg": {"before": load_before, "after": load_after},
        "note": note,
    }
    (img_dir / "results.json").write_text(json.dumps({**meta, "results": results}, indent=1))
    write_report(out, {**meta, "results": results})


def render_saved(out: Path) -> None:
    """``--render-only``: the report of the run saved next to ``out``, rendered again (a
    change to the report's code shows without measuring again)."""
    saved = out.parent / out.stem / "results.json"
    if not saved.exists():
        sys.exit(f"[bench/all] no saved run at {saved}: run the benchmarks first")
    write_report(out, json.loads(saved.read_text()))


def write_report(out: Path, run: dict[str, Any]) -> None:
    """The plots and the markdown of one run (``results.json``'s content)."""
    img_dir = out.parent / out.stem
    results = run["results"]
    rows = turn_rows(results)
    floors = {"turn_overhead": floor_of(rows, "turn_overhead"), "peers": floor_of(rows, "peers")}
    plot_turns(rows, floors, img_dir / "ms_per_turn.png")
    sub = results["submit_latency"]["samples_ms"]
    plot_submit(
        {
            "dbos-agents: submit -> run finished": sub["sequential"][PRIMARY],
            "dbos-agents: submit -> tool message recorded": sub["sequential"][TOOL_MSG],
            "raw DBOS: send -> workflow finished": sub["raw"][RAW_PRIMARY],
        },
        img_dir / "submit_resume.png",
    )
    md = report(
        results,
        command=run["command"],
        sizes=Sizes(**{**asdict(DEFAULT), "rounds": 1, **run["sizes"]}),
        started=dt.datetime.fromisoformat(run["started_utc"]),
        wall_s=run["wall_s"],
        host=run["machine"],
        load=(run["loadavg"]["before"], run["loadavg"]["after"]),
        note=run["note"],
        img_dir=img_dir.name,
    )
    out.write_text(md)
    print(md)
    print(f"[bench/all] wrote {out} and {img_dir}/", file=sys.stderr)


if __name__ == "__main__":
    main()
