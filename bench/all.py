"""Every benchmark in one command: runs them, writes docs/benchmarks.md and its PNG plots.

    pip install -e '.[bench]' && python bench/all.py [--quick] [--server-url URL]
        [--sessions N] [--peer-sessions N] [--turns N] [--rounds N] [--pg-sessions N] ...
        [--note TEXT] [--no-peers] [--out docs/benchmarks.md] [--render-only]

Each benchmark runs in a subprocess of its own, because DBOS is a process singleton, on a
fresh database, because DBOS would recover an earlier run's workflows and measure those
too. Every ratio divides by a floor measured in the same run: on a shared machine absolute
milliseconds move with the load, ratios much less. ms per turn (ours and the peers) runs in
``--rounds`` alternated rounds: ours and LangGraph's are close enough that one run's order
and noise would decide which is faster. The steps, sizes and run times:
docs/bench-notes/README.md. ``report.py`` renders what the steps measured; the raw results
go to docs/benchmarks/results.json. matplotlib is the extra ``bench``, never a dependency.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from _lib.db import LOCAL_SERVER
from _lib.procfs import loadavg
from report import DEFAULT, QUICK, Sizes, render_saved, require_matplotlib, write_report

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
PY = sys.executable


class BenchFailed(RuntimeError):
    """A benchmark subprocess failed or printed no JSON; carries its stderr tail."""


def _first(path: str, key: str) -> str | None:
    """Value of the first ``key: value`` line of a /proc file (None off Linux)."""
    try:
        with open(path) as f:
            pairs = [line.partition(":") for line in f]
    except OSError:
        return None
    return next((v.strip() for k, _, v in pairs if k.strip() == key), None)


def machine(server_url: str) -> dict[str, str]:
    """What the numbers were measured on; the CPU and load matter more than anything else."""
    import psycopg
    from sqlalchemy.engine import make_url

    url = make_url(server_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), connect_timeout=10) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    mem_kb = _first("/proc/meminfo", "MemTotal")
    cpus = os.cpu_count() or 0
    return {
        "CPU": f"{_first('/proc/cpuinfo', 'model name') or platform.processor() or 'unknown'}"
        f", {cpus} logical CPUs ({len(os.sched_getaffinity(0))} usable by this process)",
        "RAM": f"{int(mem_kb.split()[0]) / 1024 / 1024:.1f} GiB" if mem_kb else "unknown",
        "OS": f"{platform.system()} {platform.release()} ({platform.machine()})",
        "Python": f"{platform.python_implementation()} {platform.python_version()}",
        "Postgres": f"{row[0] if row else 'unknown'} at {url.render_as_string(hide_password=True)}",
    }


def busy_note(load_before: str, note: str | None) -> str | None:
    """The user's note, plus a warning when the 1-minute load already exceeded half the CPUs
    at the start: absolute milliseconds are then inflated (the ratios much less so)."""
    try:
        load1 = float(load_before.split()[0])
    except (ValueError, IndexError):
        return note
    cpus = len(os.sched_getaffinity(0))
    if load1 <= 0.5 * cpus:
        return note
    warning = (
        f"The machine was busy: 1-minute load average {load1:.2f} on {cpus} CPUs when the run"
        " started, so absolute milliseconds are inflated; compare ratios, not milliseconds."
    )
    return f"{note} {warning}" if note else warning


def run_json(label: str, cmd: Sequence[str], timeout: float = 3600) -> list[dict[str, Any]]:
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

    url = create_fresh_database(server_url, f"dbos_agents_bench_all_{name}")
    try:
        return run_json(label, [*argv, "--database-url", url], timeout=1800)[-1]
    finally:
        drop_database(server_url, f"dbos_agents_bench_all_{name}")


def merge_rounds(rounds: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per system over the rounds: the median of the rounds' medians and p90s (each
    round is a process of its own, with its own floor); samples, where a script gives them,
    pooled; ``rounds_ms`` keeps each round's median; ``pg`` is the round's that measured it."""
    out = []
    for first in rounds[0]:
        same = [next(r for r in rnd if r["system"] == first["system"]) for rnd in rounds]
        row = {**first, "rounds_ms": [r["ms_per_turn_median"] for r in same]}
        for k in ("ms_per_turn_median", "ms_per_turn_p90"):
            row[k] = statistics.median([r[k] for r in same])
        if "samples_ms_per_turn" in first:
            row["samples_ms_per_turn"] = [x for r in same for x in r["samples_ms_per_turn"]]
        row["pg"] = next((r["pg"] for r in same if r.get("pg")), None)
        out.append(row)
    return out


def run_all(server: str, s: Sizes, peers: bool) -> dict[str, Any]:
    """The benchmarks, one after the other; ms per turn (ours and the peers) in ``s.rounds``
    alternated rounds, every other one with the peers first, so neither side always runs on
    a warmer or a busier machine. The Postgres windows run in the first round only."""
    turns = ("--turns", str(s.turns))
    turn_rounds: list[dict[str, Any]] = []
    peer_rounds: list[list[dict[str, Any]]] = []
    for i in range(s.rounds):
        pg = ("--pg-sessions", str(s.pg_sessions if i == 0 else 0))
        ours = [PY, "bench/turn_overhead.py", "--json", "--sessions", str(s.sessions), *turns, *pg]
        theirs = [PY, "bench/peers/run.py", "--json", "--server-url", server, *turns, *pg]
        for who in ("ours", "peers") if i % 2 == 0 else ("peers", "ours"):
            if who == "ours":
                label = f"1/7 turn_overhead (round {i + 1})"
                turn_rounds.append(on_fresh_database(server, "turns", label, ours))
            elif peers:
                argv = [*theirs, "--sessions", str(s.peer_sessions)]
                peer_rounds.append(run_json(f"2/7 peers (round {i + 1})", argv))
    turn = {**turn_rounds[0], "rows": merge_rounds([t["rows"] for t in turn_rounds])}
    submit = on_fresh_database(server, "submit", "3/7 submit_latency", [
        PY, "bench/submit_latency.py", "--json", "--handle-samples", "0",
        "--sequential", str(s.sequential), "--raw", str(s.raw)])  # fmt: skip
    starts = on_fresh_database(server, "start", "4/7 start_latency",
                               [PY, "bench/start_latency.py", "--json", "--sessions", str(s.starts)])  # fmt: skip
    parked_argv = [PY, "bench/parked.py", "--json", "--sessions", str(s.parked),
                   "--burst", str(s.burst), "--samples", str(min(300, s.parked // 4)),
                   "--start-wave", "500", "--idle", "5"]  # fmt: skip
    parked = on_fresh_database(server, "parked", "5/7 parked", parked_argv)
    in_memory = on_fresh_database(server, "parked", "5b/7 parked, waits kept in memory",
                                  [*parked_argv, "--park-after", "never"])  # fmt: skip
    recovery = run_json("6/7 recovery", [PY, "bench/recovery.py", "--json", "--private-cluster",
                                         "--sessions", str(s.recovery)], 1800)[-1]  # fmt: skip
    concurrency = run_json("7/7 concurrency", [
        PY, "bench/concurrency.py", "--json", "--database-url", server,
        "--sessions", ",".join(map(str, s.conc_sessions)),
        "--model-ms", ",".join(map(str, s.conc_model_ms)),
        "--turns", str(s.conc_turns), "--rounds", str(s.conc_rounds),
        "--db-prefix", "dbos_agents_bench_all_conc", *(() if peers else ("--systems", "ours"))],
        7200)[-1]  # fmt: skip
    live = [PY, "bench/streaming.py", "--json", "--server-url", server, "--latency-rounds", "3"]
    streaming = run_json("8 streaming", [*live, *(("--peers",) if peers else ())])[-1]
    streaming_workers = run_json("8 streaming, two server processes", [
        *live, "--latency-only", "--no-floors", "--streams", "200", "--server-workers", "2"])[-1]  # fmt: skip
    chat = [PY, "bench/chat_ui.py", "--json", "--server-url", server]
    chat_ui = run_json("9 chat UIs", chat)[-1]
    chat_ui_workers = run_json("9 chat UIs, two server processes", [*chat, "--server-workers", "2"])[-1]  # fmt: skip
    models = run_json("10 models", [PY, "bench/models.py", "--json", "--database-url", server], 1800)[-1]  # fmt: skip
    return {
        "models": models,
        "streaming": streaming,
        "streaming_workers": streaming_workers,
        "chat_ui": chat_ui,
        "chat_ui_workers": chat_ui_workers,
        "turn_overhead": turn,
        "peers": merge_rounds(peer_rounds) if peers else [],
        "rounds": s.rounds,
        "submit_latency": submit,
        "start_latency": starts,
        "parked": parked,
        "in_memory": in_memory,
        "recovery": recovery,
        "concurrency": concurrency,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument(
        "--server-url",
        default=os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", LOCAL_SERVER),
        help="any database URL on the Postgres server; fresh databases are created there",
    )
    p.add_argument("--quick", action="store_true", help="a smoke run (tiny sizes)")
    for f in fields(Sizes):  # --sessions, --conc-model-ms 50,1000, ...: see Sizes
        many = isinstance(getattr(DEFAULT, f.name), tuple)
        p.add_argument(
            f"--{f.name.replace('_', '-')}",
            type=(lambda t: tuple(int(x) for x in t.split(",") if x.strip())) if many else int,
            help=f"default {getattr(DEFAULT, f.name)} (--quick: {getattr(QUICK, f.name)})",
        )
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
        render_saved(args.out.resolve(), DEFAULT_OUT)
        return
    base = asdict(QUICK if args.quick else DEFAULT)
    sizes = Sizes(
        **{k: v if getattr(args, k) is None else getattr(args, k) for k, v in base.items()}
    )
    flat = [x for v in asdict(sizes).values() for x in (v if isinstance(v, tuple) else (v,))]
    if not sizes.conc_sessions or not sizes.conc_model_ms or min(flat) < 1:
        p.error("every size must be at least 1")
    out: Path = args.out.resolve()
    (out.parent / out.stem).mkdir(parents=True, exist_ok=True)
    try:
        script = Path(sys.argv[0]).resolve().relative_to(Path.cwd())
    except ValueError:
        script = Path(sys.argv[0])
    started, load_before = dt.datetime.now(dt.UTC), loadavg()
    host = machine(args.server_url)
    t0 = time.perf_counter()
    try:
        results = run_all(args.server_url, sizes, peers=not args.no_peers)
    except BenchFailed as exc:
        sys.exit(f"[bench/all] {exc}")
    run = {
        "command": shlex.join(["python", str(script), *sys.argv[1:]]),
        "started_utc": started.isoformat(timespec="seconds"),
        "wall_s": round(time.perf_counter() - t0, 1),
        "sizes": asdict(sizes),
        "machine": host,
        "loadavg": {"before": load_before, "after": loadavg()},
        "note": busy_note(load_before, args.note),
        "results": results,
    }
    (out.parent / out.stem / "results.json").write_text(json.dumps(run, indent=1))
    write_report(out, run)


if __name__ == "__main__":
    main()
