"""Rendering: rich tables for a script's console, markdown tables and the sections of
docs/benchmarks.md. Each ``*_section`` turns one benchmark's JSON into markdown lines; a
benchmark run alone prints the same lines (``show``), so its console and the report agree.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

from _lib.labels import (
    OURS,
    PER_TURN,
    PRIMARY,
    RAW_CALL,
    RAW_PRIMARY,
    START_ROWS,
    SUBMIT_CALL,
    TOOL_MSG,
)
from _lib.stats import pct as nearest
from _lib.stats import pct_rounded as pct


def rich_table(title: str, columns: Sequence[str], left: Collection[str] | None = None) -> Table:
    """A table whose ``left`` columns (default: the first) are left-aligned, the rest
    right-aligned (numbers)."""
    left = {columns[0]} if left is None else left
    t = Table(title=title)
    for col in columns:
        t.add_column(col, justify="left" if col in left else "right")
    return t


def table(header: Sequence[str], body: Sequence[Sequence[str]], right_from: int = 1) -> str:
    """A markdown table; columns from ``right_from`` on are right-aligned."""
    align = ["---" if i < right_from else "---:" for i in range(len(header))]
    return "\n".join("| " + " | ".join(r) + " |" for r in [header, align, *body])


def ratio(ours: float | None, floor: float | None) -> str:
    """ours / floor as ``2.5x``, ``-`` when either is missing."""
    return "-" if ours is None or not floor else f"{ours / floor:.1f}x"


def show(lines: list[str], console: Console | None = None) -> None:
    """A section's markdown, as the report has it, on the console."""
    print("\n".join(lines), file=(console or Console()).file, flush=True)


def met(ok: bool) -> str:
    return "yes" if ok else "**no**"


def cells(xs: Sequence[float], p: Callable[[Sequence[float], float], float] = pct) -> list[str]:
    """n, p50, p90, p99 and max of ``xs`` (ms), by the percentile ``p``."""
    return [str(len(xs)), *(f"{p(xs, q):.1f}" for q in (50, 90, 99)), f"{max(xs):.1f}"]


def times(x: float, floor: float | None) -> str:
    """x / floor as ``2.50``, ``-`` without a floor."""
    return f"{x / floor:.2f}" if floor else "-"


TURN_HEADER = (
    "system", "measured in", "median ms", "p90 ms", "x floor A", "x floor B",
    "CPU ms", "PG CPU ms", "xacts", "stmts", "WAL KB",
)  # fmt: skip


@dataclass(frozen=True)
class TurnRow:
    system: str
    source: str  # which process measured it: "turn_overhead" or "peers"
    median: float
    p90: float
    samples: list[float]  # per-session ms/turn; empty for the peers (they report summaries)
    floor: bool
    rounds_ms: list[float]  # each round's median (one entry when not run in rounds)
    pg: dict[str, Any]  # the Postgres window's figures per turn (bench/_lib/pgwatch.py), or {}


def turn_rows(results: dict[str, Any]) -> list[TurnRow]:
    def row(r: dict[str, Any], source: str) -> TurnRow:
        median = r["ms_per_turn_median"]
        return TurnRow(r["system"], source, median, r["ms_per_turn_p90"],
                       r.get("samples_ms_per_turn", []), r["floor"],
                       r.get("rounds_ms", [median]), r.get("pg") or {})  # fmt: skip

    rows = [row(r, "turn_overhead") for r in results["turn_overhead"]["rows"]]
    rows += [row(r, "peers") for r in results["peers"]]
    return sorted(rows, key=lambda r: r.median)


def floor_of(rows: list[TurnRow], source: str) -> float | None:
    return next((r.median for r in rows if r.floor and r.source == source), None)


def turn_table(rows: list[TurnRow]) -> str:
    """The per-turn table: ms, the ratios to both floors, and the Postgres window's figures."""
    floor_a, floor_b = floor_of(rows, "turn_overhead"), floor_of(rows, "peers")
    return table(TURN_HEADER, [
        (f"**{r.system}**" if r.system == OURS else r.system, r.source, f"{r.median:.2f}",
         f"{r.p90:.2f}", times(r.median, floor_a), times(r.median, floor_b),
         *("-" if r.pg.get(k) is None else f"{r.pg[k]:.2f}" for k in PER_TURN))
        for r in rows], right_from=2)  # fmt: skip


def submit_section(sub: dict[str, Any]) -> list[str]:
    """bench/submit_latency.py: sequential submit -> resume against the raw recv/send floor
    (nearest-rank percentiles)."""
    seq, raw = sub["samples_ms"]["sequential"], sub["samples_ms"]["raw"]
    raw_p50 = nearest(raw[RAW_PRIMARY], 50)
    return [
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
                (name, *cells(xs, nearest), times(nearest(xs, 50), raw_p50) if vs_floor else "")
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
        f"Headline: submit -> resume p50 is **{times(nearest(seq[PRIMARY], 50), raw_p50)}x** the raw"
        " DBOS send -> recv floor's p50 measured alongside it."
        + (
            f" With {len(seq[PRIMARY])} samples p99 is close to the maximum; a larger"
            " `--sequential` gives a meaningful tail."
            if len(seq[PRIMARY]) < 200
            else ""
        ),
        "",
    ]


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
                (label, *cells(samples[key]), f"{cpu[ck]:.1f}" if ck else "")
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
        ("time to park (first start -> last armed)",
         f"{f['park_s']:.1f} s ({f['park_rate']:.0f}/s, worker CPU {f['park_worker_cpu_s']:.1f} s)", "", ""),
        ("RSS above the launch baseline per waiting session", f"{f['rss_kb_per_session']:.1f} KB",
         "<= 20 KB at 10,000", judged(f["rss_kb_per_session"] <= 20)),
        ("OS threads: baseline / parked / max seen",
         f"{f['baseline_threads']} / {f['parked_threads']} / {f['max_threads']}", "<= 64",
         met(f["max_threads"] <= 64)),
        ("Postgres connections of the worker: parked / max",
         f"{f['pg_conns_parked']} / {f['pg_conns_max']}", "", ""),
        ("worker CPU while parked and idle",
         f"{f['idle_cpu_pct']:.1f} % of a core (before parking {f['base_idle_cpu_pct']:.1f} %)", "", ""),
        (f"submit -> run finished p50 ({f['samples']} sequential)", f"{f['p50_ms']:.1f} ms",
         "<= 20 ms at 10,000", judged(f["p50_ms"] <= 20)),
        ("submit -> run finished p99", f"{f['p99_ms']:.1f} ms", "<= 100 ms at 10,000",
         judged(f["p99_ms"] <= 100)),
        (f"burst of {f['burst']} submits: drain rate", f"{f['drain_per_s']:.1f} sessions/s",
         ">= 60/s", met(f["drain_per_s"] >= 60)),
        ("burst: worker CPU per resumed turn", f"{f['cpu_ms_per_turn']:.1f} ms", "", ""),
    ]  # fmt: skip
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
        ("duplicate effects", str(chk["duplicate_effects"]), "0", met(chk["duplicate_effects"] == 0)),
        ("durability errors (the model told the outcome is unknown)", str(chk["durability_errors"]), "", ""),
    ]  # fmt: skip
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


GOAL_SESSIONS = 200
"""The goals are set at this many sessions at once; a smaller run is shown, not judged."""

HEADER = (
    "system", "N", "model ms", "turns/s", "x LangGraph", "CPU ms/turn", "x 1 session",
    "PG CPU ms/turn", "PG x LangGraph", "xacts/turn", "stmts/turn", "WAL KB/turn", "new conns",
    "p50 s", "p99 s", "failed",
)  # fmt: skip


def _f(x: float | None, fmt: str, suffix: str = "") -> str:
    return "-" if x is None else f"{x:{fmt}}{suffix}"


def table_rows(res: dict[str, Any]) -> list[tuple[str, ...]]:
    """One line per (system, N, model ms), in HEADER's columns."""
    out = []
    for r in res["rows"]:
        name = res["labels"].get(r["system"], r["system"])
        if "error" in r:
            out.append((name, str(r["sessions"]), f"{r['model_ms']:g}", "failed", *[""] * 12))
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
                _f(r.get("wal_kb_per_turn"), ".1f"),
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
        " pg_stat_database's commits + rollbacks; WAL the server's over the window"
        " (pg_current_wal_lsn()); new conns the connections opened during the"
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


def streaming_section(
    res: dict[str, Any] | None, workers: dict[str, Any] | None = None
) -> list[str]:
    """bench/streaming.py: adapter -> SSE reader latency, and streaming's cost per turn;
    ``workers``: the latency again with ``serve --workers 2`` (the largest N only)."""
    out = ["## Live streams", ""]
    if res is None:
        return [*out, "Not measured in this run (`python bench/streaming.py`).", ""]
    lat, turns = res["latency"], res.get("per_turn")
    more = [
        {**r, "label": f"dbos-agents, serve --workers {r['server_workers']}"}
        for r in (workers or {}).get("latency", [])
    ]
    big_rounds = max((r.get("rounds", 1) for r in lat if not r.get("label")), default=1)
    out += [
        "`bench/streaming.py`: a worker whose model stamps each piece as it leaves the adapter"
        " (one piece every 50 ms per reply), `dbos-agents serve` and the readers, in three"
        " processes on one database; N sessions start at once over HTTP and N readers follow"
        " `GET /sessions/{id}/events`. Latency is the reader's clock at arrival minus the"
        " stamp. Every piece must arrive exactly once (the last column counts sessions where"
        " it did not). The floors, at the largest N, started as spread as our sessions were"
        " and read by the same readers: the SSE stack alone (pieces stamped in a bare"
        " uvicorn + Starlette + sse-starlette server), and the same fed by `pg_notify`"
        " batches from a producer process at our worker's flush interval"
        " (`bench/streaming.py --floor-serve`)."
        + (
            " The largest N again with two server processes (`dbos-agents serve --workers 2`),"
            " the worker still one."
            if more
            else ""
        )
        + (
            f" Each N of ours ran {big_rounds} rounds (fresh sessions each), their pieces"
            " pooled; the goals list each round's p99 too, and CPU is per round."
            if big_rounds > 1
            else ""
        ),
        "",
        table(
            ("system", "streams", "pieces", "p50 ms", "p90 ms", "p99 ms", "max ms",
             "wrong counts", "server CPU s"),
            [(r.get("label", "dbos-agents"), str(r["streams"]), str(r["pieces"]),
              *(f"{r[k]:.1f}" for k in ("p50_ms", "p90_ms", "p99_ms", "max_ms")),
              str(r["sessions_with_wrong_count"]), f"{r['server_cpu_s']:.2f}")
             for r in [*lat, *more]],
        ),
        "",
    ]  # fmt: skip
    big = max((r for r in lat if not r.get("label")), key=lambda r: r["streams"])
    goals = [
        (f"adapter -> reader p50, {big['streams']} streams", f"{big['p50_ms']:.1f} ms",
         "<= 10 ms", met(big["p50_ms"] <= 10)),
        (f"adapter -> reader p99, {big['streams']} streams{_per_round(big)}",
         f"{big['p99_ms']:.1f} ms", "<= 50 ms", met(big["p99_ms"] <= 50)),
    ]  # fmt: skip
    if turns:
        off = turns["off_ms"]
        out += [
            f"Per turn: sequential sessions of {turns['turns']} tool turns and an answer,"
            " `ScriptedModel` streaming 8-character pieces with no model latency (the worst"
            " case for the overhead), sessions alternating streaming on and off; medians of"
            f" {len(turns['rounds_on_ms'])} rounds.",
            "",
        ]
        rows = [
            ("dbos-agents, streaming off", f"{off:.2f}", "1.00x", "0", "-"),
            ("dbos-agents, streaming on", f"{turns['on_ms']:.2f}", f"{turns['on_ms'] / off:.2f}x",
             f"{turns['rows_per_turn']:.1f}", f"{turns['batches_per_turn']:.2f}"),
        ]  # fmt: skip
        lg = turns.get("langgraph_stream")
        if lg:
            ms = lg["ms_per_turn_median"]
            rows.append(("LangGraph + AsyncPostgresSaver, streaming", f"{ms:.2f}", "", "-", "-"))
        header = ("system", "ms per turn", "x streaming off", "delta rows/turn", "batches/turn")
        out += [table(header, rows), ""]
        goals.append(("per turn, streaming on / off", f"{turns['on_ms'] / off:.2f}x", "<= 1.2x",
                      met(turns["on_ms"] / off <= 1.2)))  # fmt: skip
        if pg := turns.get("pg"):
            out += [_streamed_pg(pg), ""]
            extra = pg["extra_pg_cpu_over_plain"]
            goals.append(("a streamed turn's extra Postgres CPU / a plain turn's", f"{extra:.2f}x",
                          "<= 0.3x", met(extra <= 0.3)))  # fmt: skip
    for r in more:
        goals.append((f"adapter -> reader p50 / p99, {r['streams']} streams, {r['server_workers']}"
                      f" server processes{_per_round(r)}", f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms",
                      "<= 10 / <= 50 ms", met(r["p50_ms"] <= 10 and r["p99_ms"] <= 50)))  # fmt: skip
    for r in lat:
        if r.get("label", "").startswith("floor: +"):
            goals.append((f"{r['label']}, p50 / p99", f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f} ms",
                          "reported", ""))  # fmt: skip
    if turns and (lg := turns.get("langgraph_stream")):
        goals.append(("per turn, ours / LangGraph, both streaming",
                      f"{turns['on_ms'] / lg['ms_per_turn_median']:.2f}x", "reported", ""))  # fmt: skip
    return [*out, table(("figure", "value", "goal", "met"), goals), ""]


def _streamed_pg(pg: dict[str, Any]) -> str:
    """Postgres per model call of a plain and a streamed turn (alternated windows)."""
    rows = [
        (label, *(f"{pg[k][m]:.2f}" for m in ("pg_cpu_ms_per_turn", "xacts_per_turn",
                                              "stmts_per_turn", "wal_kb_per_turn")))
        for label, k in (("plain turn", "ours"), ("streamed turn", "ours_streamed"))
    ]  # fmt: skip
    head = ("Postgres per model call", "CPU ms", "xacts", "stmts", "WAL KB")
    return table(head, rows)


def _per_round(r: dict[str, Any]) -> str:
    """A pooled row's rounds and each round's p99, for the goal's label."""
    if r.get("rounds", 1) <= 1:
        return ""
    each = " / ".join(f"{x:.0f}" for x in r["round_p99_ms"])
    return f" ({r['rounds']} rounds pooled; p99 per round {each} ms)"


GOAL_CHATS = 100
"""Issue 28's chat-UI goals are set for this many chats at once on one worker; a smaller
largest N is shown but not judged."""


def chat_ui_section(res: dict[str, Any] | None, workers: dict[str, Any] | None = None) -> list[str]:
    """bench/chat_ui.py: the AI SDK's client (AbstractChat + DefaultChatTransport) with N
    chats at once: first token after the model's first delta, a client tool's round trip;
    ``workers``: the same with ``dbos-agents serve --workers 2``."""
    out = ["## Chat UIs (AI SDK)", ""]
    if res is None:
        return [*out, "Not measured in this run (`python bench/chat_ui.py`).", ""]
    a = res["args"]
    runs = [r for r in (res, workers) if r is not None]
    rows = [row for run in runs for row in run["rows"]]

    def ms(x: float | None) -> str:
        return "-" if x is None else f"{x:.1f}"

    keys = ("first_token_p50_ms", "first_token_p99_ms", "round_trip_p50_ms", "round_trip_p99_ms",
            "round_trip_post_p50_ms", "round_trip_resume_p50_ms", "round_trip_deliver_p50_ms")  # fmt: skip
    body: list[tuple[str, ...]] = [
        (str(r["chats"]), str(r.get("server_workers", 1)), *(ms(r[k]) for k in keys),
         str(r["chats_with_wrong_text"])) for r in rows
    ]  # fmt: skip
    header: tuple[str, ...] = (
        "chats", "server processes", "first token p50 ms", "p99 ms", "round trip p50 ms", "p99 ms",
        "tool -> POST", "POST -> piece", "piece -> client", "wrong text",
    )  # fmt: skip
    floored = any("floor_first_token_p50_ms" in r for r in rows)
    if floored:  # results from before the floor have no floor_* keys: "-"
        header += ("floor: first token p50 / p99", "floor: round trip p50 / p99",
                   "ours / floor: first token, round trip")  # fmt: skip
        body = [(*b, *_floor_cells(r)) for b, r in zip(body, rows, strict=True)]
    out += [
        "`bench/chat_ui.py`: a worker whose model stamps each piece as it leaves the adapter,"
        " `dbos-agents serve` (session tokens; one process, then `--workers 2`) and one Node"
        " process running the official"
        " `AbstractChat` + `DefaultChatTransport` (what `useChat` runs), on one database. For"
        f" each N, {a['rounds']} round(s) of: N chats with `stamp` at once ({a['pieces']}"
        f" pieces, one every {a['pace_ms']:g} ms, after {a['lead_ms']:g} ms), then N chats with"
        " `asker` (a client tool answered by `onToolCall` + `addToolOutput`, posted by"
        " `sendAutomaticallyWhen`, then a streamed answer); each chat starts within"
        f" {a['spread_ms']:g} ms of its phase. First token: the first `text-delta`'s arrival"
        " at the client minus its stamp. Round trip: `onToolCall` -> the answer's first"
        " `text-delta`. Wrong text counts chats whose text is not exactly the stamped pieces"
        " once each. See docs/bench-notes/chat_ui.md."
        + (" Floor: the same Node client and options, just before ours at each N, against"
           " `bench/chat_ui.py --floor-server`, a server with no database that streams the same parts"
           " (HTTP, SSE and the AI SDK on this host, without us)." if floored else ""),
        "",
        table(header, body),
        "",
    ]  # fmt: skip
    n = max(r["chats"] for r in rows)

    def judged(x: float | None, goal: float) -> str:
        if n < GOAL_CHATS:
            return f"n/a ({n} chats)"
        return met(x is not None and x <= goal)

    goals = []
    for r in rows:
        if r["chats"] != n:
            continue
        ft, rt, w = r["first_token_p50_ms"], r["round_trip_p50_ms"], r.get("server_workers", 1)
        goals += [
            (f"first token p50, {n} chats, {w} server process(es)", f"{ms(ft)} ms", "<= 15 ms",
             judged(ft, 15)),
            (f"client-tool round trip p50, {n} chats, {w} server process(es)", f"{ms(rt)} ms",
             "<= 30 ms", judged(rt, 30)),
        ]  # fmt: skip
    wrong = sum(r["chats_with_wrong_text"] for r in rows)
    goals.append(("chats with wrong text (every N)", str(wrong), "0", met(wrong == 0)))
    if floored:
        wrong = sum(r.get("floor_chats_with_wrong_text", 0) for r in rows)
        goals.append(("chats with wrong text, floor (every N)", str(wrong), "0", met(wrong == 0)))
    return [*out, table(("figure", "value", "goal", "met"), goals), ""]


def _floor_cells(r: dict[str, Any]) -> tuple[str, str, str]:
    """A chat-UI row's floor columns: first token and round trip p50 / p99, ours / floor."""
    if "floor_first_token_p50_ms" not in r:
        return "-", "-", "-"

    def pair(key: str) -> str:
        p50, p99 = r[f"floor_{key}_p50_ms"], r[f"floor_{key}_p99_ms"]
        return "-" if p50 is None else f"{p50:.1f} / {p99:.1f}"

    def of(key: str) -> str:
        return ratio(r[f"{key}_p50_ms"], r[f"floor_{key}_p50_ms"])

    return pair("first_token"), pair("round_trip"), f"{of('first_token')}, {of('round_trip')}"
