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
4. bench/start_latency.py, bench/parked.py (twice: parking on and off), bench/recovery.py.
5. bench/concurrency.py --json: N sessions at once on ours and the peers (each system in its
   own process and database, alternated rounds), turns/s and CPU per turn.
6. bench/streaming.py --json (live streams) and bench/chat_ui.py --json (the AI SDK's client
   with 1 and 100 chats at once; then again with `serve --workers 2`), each with its worker
   and server in processes of their own.
7. bench/models.py --json: the Anthropic adapter against the OpenAI adapter per turn, and
   each adapter's CPU per streamed piece against its SDK's bare stream loop.

Every ratio in the report divides by a floor measured in the same run (on the same machine,
at the same load), never by a number from another day: on a shared machine absolute
milliseconds move with the load, ratios much less. Tests never assert on wall-clock time;
this is where the timings live.

This module runs the benchmarks; ``report.py`` renders what they measured (with
``turns.py`` for the per-turn rows and plots, ``machine.py`` for the machine's facts and
``sections.py`` for the later sections). The report records the date, the machine (CPU, RAM, load average before and after), the
Python and Postgres versions, every package version and the exact command, so a number is
never quoted without what produced it. The raw results go to docs/benchmarks/results.json
next to the plots. ``--quick`` is a smoke run (how long runs take:
docs/bench-notes/README.md). matplotlib is the optional extra ``bench``, never a runtime
dependency of dbos-agents.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from _lib.db import LOCAL_SERVER
from _lib.procfs import loadavg
from machine import busy_note, machine
from report import DEFAULT, QUICK, Sizes, render_saved, write_report
from turns import require_matplotlib

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
PY = sys.executable

TURN_DB = "dbos_agents_bench_all_turns"
SUBMIT_DB = "dbos_agents_bench_all_submit"
START_DB = "dbos_agents_bench_all_start"
PARKED_DB = "dbos_agents_bench_all_parked"
CONC_DB_PREFIX = "dbos_agents_bench_all_conc"


class BenchFailed(RuntimeError):
    """A benchmark subprocess failed or printed no JSON; carries its stderr tail."""


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
                f"1/7 turn_overhead (round {i + 1}/{sizes.rounds})",
                [
                    *(PY, "bench/turn_overhead.py", "--json"),
                    *("--sessions", str(sizes.sessions), "--turns", str(sizes.turns)),
                ],
            )
        )

    def theirs(i: int) -> None:
        peer_rounds.append(
            run_json(
                f"2/7 peers (round {i + 1}/{sizes.rounds})",
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
        "3/7 submit_latency",
        [
            *(PY, "bench/submit_latency.py", "--json", "--concurrent", "0"),
            *("--handle-samples", "0", "--sequential", str(sizes.sequential)),
            *("--raw", str(sizes.raw)),
        ],
    )
    starts = on_fresh_database(
        server_url,
        START_DB,
        "4/7 start_latency",
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

    parked = parked_bench("5/7 parked")
    in_memory = parked_bench("5b/7 parked, waits kept in memory", "--park-after", "never")
    recovery = run_json(
        "6/7 recovery",
        [
            *(PY, "bench/recovery.py", "--json", "--private-cluster"),
            *("--sessions", str(sizes.recovery)),
        ],
        timeout=1800,
    )[-1]
    concurrency = run_json(
        "7/7 concurrency",
        [
            *(PY, "bench/concurrency.py", "--json", "--database-url", server_url),
            *("--sessions", ",".join(map(str, sizes.conc_sessions))),
            *("--model-ms", ",".join(map(str, sizes.conc_model_ms))),
            *("--turns", str(sizes.conc_turns), "--rounds", str(sizes.conc_rounds)),
            *("--db-prefix", CONC_DB_PREFIX),
            *(() if peers else ("--systems", "ours")),
        ],
        timeout=7200,
    )[-1]
    streaming = run_json(
        "8 streaming",
        [
            *(PY, "bench/streaming.py", "--json", "--server-url", server_url),
            *("--latency-rounds", "3", *(("--peers",) if peers else ())),
        ],
        timeout=3600,
    )[-1]
    streaming_workers = run_json(
        "8 streaming, two server processes",
        [
            *(PY, "bench/streaming.py", "--json", "--server-url", server_url),
            *("--latency-only", "--no-floors", "--streams", "200", "--server-workers", "2"),
            *("--latency-rounds", "3"),
        ],
        timeout=3600,
    )[-1]
    chat_ui = run_json(
        "9 chat UIs",
        [*(PY, "bench/chat_ui.py", "--json", "--server-url", server_url)],
        timeout=3600,
    )[-1]
    chat_ui_workers = run_json(
        "9 chat UIs, two server processes",
        [*(PY, "bench/chat_ui.py", "--json", "--server-url", server_url, "--server-workers", "2")],
        timeout=3600,
    )[-1]
    models = run_json(
        "10 models", [PY, "bench/models.py", "--json", "--database-url", server_url], timeout=1800
    )[-1]
    return {
        "models": models,
        "streaming": streaming,
        "streaming_workers": streaming_workers,
        "chat_ui": chat_ui,
        "chat_ui_workers": chat_ui_workers,
        "turn_overhead": turn,
        "peers": peer_rows,
        "rounds": sizes.rounds,
        "submit_latency": submit,
        "start_latency": starts,
        "parked": parked,
        "in_memory": in_memory,
        "recovery": recovery,
        "concurrency": concurrency,
    }


def int_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split(",") if x.strip())


# ---------------------------------------------------------------------------- main


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--server-url",
        default=os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", LOCAL_SERVER),
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
    for name, help_ in (
        ("conc-sessions", "concurrency: sessions at once, a list (50,200)"),
        ("conc-model-ms", "concurrency: the model's sleep per call in ms, a list (50,1000)"),
    ):
        p.add_argument(f"--{name}", type=int_tuple, help=f"{help_} (default: see Sizes)")
    for name, help_ in (
        ("conc-turns", "concurrency: tool turns per session"),
        ("conc-rounds", "concurrency: alternated rounds"),
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
    flat = [x for v in asdict(sizes).values() for x in (v if isinstance(v, tuple) else (v,))]
    if not sizes.conc_sessions or not sizes.conc_model_ms or min(flat) < 1:
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


if __name__ == "__main__":
    main()
