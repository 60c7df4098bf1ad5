"""The report of a bench/all.py run: docs/benchmarks.md and its plots, from the results.

``write_report`` renders a run's ``results.json`` content; ``render_saved`` renders the last
saved run again (``python bench/all.py --render-only``). This module holds the head and
the plots; bench/_lib/render.py renders the sections.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from dataclasses import asdict, dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from _lib.labels import (
    COMMITS,
    LANGGRAPH,
    MIX,
    OURS,
    PRIMARY,
    RAW_PRIMARY,
    TOOL_MSG,
)
from _lib.render import (
    TurnRow,
    chat_ui_section,
    concurrency_section,
    floor_of,
    models_section,
    parked_section,
    parking_section,
    recovery_section,
    start_section,
    streaming_section,
    submit_section,
    table,
    times,
    turn_rows,
    turn_table,
)


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
    conc_sessions: tuple[int, ...] = (200,)  # concurrency: sessions at once (ours also at 1)
    conc_model_ms: tuple[int, ...] = (50, 1000)  # concurrency: the model's sleep per call
    conc_turns: int = 10  # concurrency: tool turns per session
    conc_rounds: int = 2  # concurrency: alternated rounds
    pg_sessions: int = 10  # ms per turn: sessions of each system's Postgres window


DEFAULT = Sizes(
    sessions=30, peer_sessions=30, turns=10, sequential=300, raw=100, starts=200,
    parked=2000, burst=1000, recovery=1000, rounds=3,
    conc_sessions=(200,), conc_model_ms=(50, 1000), conc_turns=10, conc_rounds=2, pg_sessions=10,
)  # fmt: skip
QUICK = Sizes(
    sessions=5, peer_sessions=3, turns=10, sequential=30, raw=10, starts=20,
    parked=200, burst=100, recovery=100, rounds=1,
    conc_sessions=(5,), conc_model_ms=(20,), conc_turns=2, conc_rounds=1, pg_sessions=3,
)  # fmt: skip


def require_matplotlib() -> None:
    """Fail before minutes of benchmarking, not after, when the plots cannot be drawn."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit(
            "bench/all.py needs matplotlib for the plots, which is not a dependency of"
            " dbos-agents itself.\nInstall the bench extra:  pip install -e '.[bench]'"
        )


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


def pkg_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "absent"


def commit_floor(rows: list[TurnRow]) -> list[str]:
    """Ours and the commit floor against LangGraph's default durability (which waits for
    none of its checkpoint writes): how far a design that keeps the crash table can go."""
    by = {r.system: r for r in rows}
    if COMMITS not in by or LANGGRAPH not in by:
        return []
    lg = by[LANGGRAPH].median
    return [
        f"Against {LANGGRAPH}, in this run: dbos-agents {by[OURS].median / lg:.2f}x; the floor"
        f" of any turn that runs a side-effecting tool at most once ({COMMITS}: its record,"
        f" the dispatch mark and the result, each durable before the next step) is"
        f" {by[COMMITS].median / lg:.2f}x by itself, before a model call, a tool or DBOS.",
        "",
    ]


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
    for k, v in results.get("concurrency", {}).get("versions", {}).items():
        if k not in versions:  # e.g. psycopg-pool, which only the concurrency peers load
            peer_versions.setdefault(k, v)

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
        f" with {sizes.raw} raw recv/send iterations, after one warm-up of each."
        + (
            f" concurrency: {', '.join(map(str, sizes.conc_sessions))} sessions at once (ours"
            f" also 1) x model {', '.join(map(str, sizes.conc_model_ms))} ms,"
            f" {sizes.conc_turns} tool turns each, {sizes.conc_rounds} alternated round(s)."
            if "concurrency" in results
            else ""
        ),
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
        " column is there to show how far apart the two floors are. Per turn, for ours and"
        " each peer: the process's CPU and its Postgres backends' CPU (ms), transactions"
        " (pg_stat_database), statements (pg_stat_statements) and the server's WAL (KB), from"
        " a window of sessions one after another, the system alone on a database of its own"
        " (bench/_lib/pgwatch.py; - where not measured).",
        "",
        turn_table(rows),
        "",
        f"Headline: dbos-agents is **{times(ours.median, floor_a)}x** the raw-DBOS 2-step floor"
        f" (floor A) and {times(ours.median, mix.median)}x the same-mix floor ({mix.system},"
        " i.e. what dbos-agents' own code adds on top of DBOS doing the same writes)"
        + "".join(
            f"; {r.system} is {times(r.median, floor_b)}x (floor B)"
            for r in rows
            if r.source == "peers" and not r.floor
        )
        + ".",
        "",
        *commit_floor(rows),
        *rounds_table(rows, results.get("rounds", 1)),
        f"![ms per turn per system]({img_dir}/ms_per_turn.png)",
        "",
        *submit_section(results["submit_latency"]),
        f"![submit -> resume latency]({img_dir}/submit_resume.png)",
        "",
        *start_section(results["start_latency"]),
        *parked_section(results["parked"]["figures"]),
        *parking_section(results["parked"]["figures"], results["in_memory"]["figures"]),
        *recovery_section(results["recovery"]),
        *concurrency_section(results.get("concurrency")),
        *streaming_section(results.get("streaming"), results.get("streaming_workers")),
        *chat_ui_section(results.get("chat_ui"), results.get("chat_ui_workers")),
        *models_section(results.get("models")),
        "## What each benchmark is",
        "",
        "- `bench/turn_overhead.py`: dbos-agents' durable loop (a model step that records the"
        " turn and the previous results in one transaction, then a tool step) against raw"
        " DBOS workflows doing 2 steps per turn, and 2 steps + 2 datasource transactions per"
        " turn, interleaved session by session.",
        "- `bench/peers/run.py`: the same conversation on other durable agent stacks, each in"
        " its own process and database under bench/peers/.venv:",
        *(f"  - {r['system']}: {r['measures']}" for r in results["peers"]),
        "- `bench/submit_latency.py`: sequential submits and the raw floor (run it alone for"
        " `await handle.result()`).",
        "- `bench/start_latency.py`: a one-turn session at a time, started in the worker and"
        " through `AgentClient`, interleaved with raw DBOS starts (direct and enqueued).",
        "- `bench/parked.py`: many sessions waiting on a client tool in one worker process"
        " (RSS, threads, connections), submits while they wait, then a burst; run twice,"
        " with the default `park_after_sec` and with `--park-after never`.",
        "- `bench/recovery.py`: SIGKILL a worker with sessions in flight on a private"
        " cluster, restart it, count duplicate effects.",
        "- `bench/concurrency.py`: N sessions started at once on dbos-agents, LangGraph +"
        " AsyncPostgresSaver and Pydantic AI + DBOS (each in its own process and database),"
        " the model sleeping per call: turns/s, process and Postgres CPU per turn, session"
        " times, transactions per turn.",
        "- `bench/streaming.py`: live streams: adapter -> SSE reader latency with N streams"
        " (worker, server and readers in three processes) and per-turn cost of streaming, on"
        " against off and against LangGraph streaming its tokens.",
        "- `bench/chat_ui.py`: the AI SDK's client (`AbstractChat` + `DefaultChatTransport`,"
        " in Node) with N chats at once on one worker: first token after the model's first"
        " delta, a client tool's round trip (worker, server and client in three processes).",
        "- `bench/models.py`: Anthropic's adapter against OpenAI's per turn, and each"
        " adapter's CPU per streamed piece against its SDK's bare stream loop.",
        "- `bench/fork.py` (fork latency) runs on its own.",
        "",
    ]
    return "\n".join(out)


def render_saved(out: Path, default: Path) -> None:
    """``--render-only``: the run saved next to ``out`` (else next to ``default``, the
    last full run's) rendered again, so a change to the report shows without measuring."""
    saved = out.parent / out.stem / "results.json"
    if not saved.exists():
        saved = default.parent / default.stem / "results.json"
    if not saved.exists():
        sys.exit(f"[bench/all] no saved run at {saved}: run the benchmarks first")
    img_dir = out.parent / out.stem
    img_dir.mkdir(parents=True, exist_ok=True)
    if saved.parent != img_dir:
        (img_dir / "results.json").write_text(saved.read_text())
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
