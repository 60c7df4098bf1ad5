"""Fleets: turns/s and worker CPU per turn with one agent against ten, over two workers.

Two ``dbos-agents worker`` processes (bench/fleet_app.py) on a fresh database per run; an
``AgentClient`` here starts ``--sessions`` sessions at once, round-robin over the agents,
each ``--tool-turns`` turns calling a no-op side-effecting tool, then an answer. turns/s:
sessions x (tool turns + 1) / (first start -> last run's end); CPU: both workers', per
turn. Configurations, alternated (order rotated each round): ``1 agent`` (both run a0),
``10 agents`` (both a0..a9), ``10 split`` (a0..a4 | a5..a9); ratios to the same round's
``1 agent``, median over rounds. ``--idle SEC``: the idle workers' CPU %, 1 vs 10 agents.
Notes and results: docs/bench-notes/fleet.md.

    python bench/fleet.py [--rounds 3] [--sessions 200] [--tool-turns 3] [--threads 8]
        [--warmup 20] [--idle 10] [--database-url SERVER] [--json]
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from _lib import cli
from _lib.child import Child
from _lib.db import LOCAL_SERVER, connect_retrying, rows
from _lib.procfs import cpu_seconds, loadavg, proc_status
from _lib.tables import rich_table
from _lib.timing import wait_until
from fleet_app import AGENTS_ENV, TURNS_ENV
from rich.console import Console

from dbos_agents import AgentClient, Settings
from dbos_agents.testing import create_fresh_database, drop_database

DB = "dbos_agents_bench_fleet"
A = [f"a{i}" for i in range(10)]
CMD = [sys.executable, "-m", "dbos_agents.cli", "worker", "--app", "fleet_app:runtime"]
DONE_SQL = (
    "SELECT executor_id, CASE WHEN status IN ('SUCCESS', 'ERROR') THEN"
    " updated_at END AS done FROM dbos.workflow_status WHERE workflow_uuid = ANY(:s)"
)
CONFIGS = {"1 agent": (A[:1], A[:1]), "10 agents": (A, A), "10 split": (A[:5], A[5:])}


@dataclass
class Fleet:
    client: AgentClient
    workers: list[Child]
    agents: list[str]

    def cpu(self) -> list[float]:
        return [cpu_seconds(w.pid) for w in self.workers]

    def burst(self, sessions: int, threads: int, turns: int) -> dict[str, Any]:
        """``sessions`` at once; wall from the first start to the last run's end."""
        work = [self.agents[i % len(self.agents)] for i in range(sessions)]
        with ThreadPoolExecutor(threads) as ex:
            cpu0, t0 = sum(self.cpu()), time.time()
            sids = list(ex.map(lambda a: self.client.start(a, "go"), work))
        started = time.time()
        wait_until("runs ended", lambda: all(r.done for r in self.ends(sids)), 600)
        cpu, ends = sum(self.cpu()) - cpu0, self.ends(sids)
        n, wall = sessions * (turns + 1), max(float(r.done) for r in ends) / 1000 - t0
        return {
            "turns_per_s": n / wall, "cpu_ms_per_turn": cpu * 1000 / n, "wall_s": wall,
            "start_s": started - t0, "runs_by_worker": dict(Counter(r.executor_id for r in ends)),
            "failed": sum(1 for s in sids if self.client.session(s).status != "completed"),
        }  # fmt: skip

    def ends(self, sids: list[str]) -> Any:
        """Each run's executor and end (epoch ms as DBOS recorded it; None: not ended)."""
        return rows(self.client.engine, DONE_SQL, connect_retrying, s=sids)

    def idle(self, seconds: float) -> list[dict[str, float]]:
        cpu0 = self.cpu()
        time.sleep(seconds)
        return [
            {"cpu_pct": 100 * (c1 - c0) / seconds, "threads": proc_status(w.pid)["Threads"]}
            for w, c0, c1 in zip(self.workers, cpu0, self.cpu(), strict=True)
        ]


@contextlib.contextmanager
def fleet(server: str, sets: tuple[list[str], ...], turns: int) -> Iterator[Fleet]:
    """Two workers (agent sets ``sets``) on a fresh database; dropped afterwards."""
    url = create_fresh_database(server, DB)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBOS_AGENTS_")}
    env |= {"PYTHONPATH": os.pathsep.join(filter(None, [sys.path[0], env.get("PYTHONPATH")])),
            "DBOS_AGENTS_DATABASE_URL": url, "DBOS_AGENTS_LOG_LEVEL": "WARNING",
            TURNS_ENV: str(turns)}  # fmt: skip
    workers: list[Child] = []
    with tempfile.TemporaryFile("w+") as err:
        try:
            for n, agents in enumerate(sets, 1):
                mine = {"DBOS_AGENTS_EXECUTOR_ID": f"fleet-w{n}", AGENTS_ENV: ",".join(agents)}
                workers.append(Child(CMD, env=env | mine, stderr=err))
            for w in workers:
                w.expect("dbos-agents worker ready", 300)
            with AgentClient(url, settings=Settings(log_level="WARNING")) as client:
                yield Fleet(client, workers, sorted({a for s in sets for a in s}))
        finally:
            for w in workers:
                w.stop(30)
            if any(w.proc.returncode != 0 for w in workers):
                err.seek(0)
                print("[fleet] a worker failed:", err.read()[-3000:], file=sys.stderr)
            drop_database(server, DB)


def run(args: Any, server: str) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    names, t = list(CONFIGS), args.tool_turns
    for r in range(args.rounds):
        for name in names[r % 3 :] + names[: r % 3]:
            with fleet(server, CONFIGS[name], t) as f:
                f.burst(args.warmup, args.threads, t)
                time.sleep(1)
                res = f.burst(args.sessions, args.threads, t)
            runs.append(res | {"config": name, "round": r + 1, "loadavg": loadavg()})
            print(f"[fleet] round {r + 1} {name}:", runs[-1], file=sys.stderr, flush=True)
    idle = {}
    for name in ("1 agent", "10 agents") if args.idle > 0 else ():
        with fleet(server, CONFIGS[name], t) as f:
            f.burst(args.warmup, args.threads, t)
            time.sleep(3)  # past the warm-up's tail
            idle[name] = f.idle(args.idle)
    return {
        "rounds": args.rounds, "sessions": args.sessions, "tool_turns": t, "runs": runs,
        "summary": summary(runs),
        "idle": idle, "idle_sec": args.idle, "loadavg": loadavg(), "versions": cli.versions(),
    }  # fmt: skip


def summary(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per configuration: figures by round, per-round ratios to ``1 agent`` (median)."""
    med, out = statistics.median, {}
    base = {r["round"]: r for r in runs if r["config"] == "1 agent"}
    for name in CONFIGS:
        mine = sorted((r for r in runs if r["config"] == name), key=lambda r: r["round"])
        pairs, w = [(base[r["round"]], r) for r in mine], [r["runs_by_worker"] for r in mine]
        out[name] = {
            "turns_per_s": [r["turns_per_s"] for r in mine],
            "cpu_ms_per_turn": [r["cpu_ms_per_turn"] for r in mine],
            "runs_w1_w2": [sum(x.get(f"fleet-w{n}", 0) for x in w) for n in (1, 2)],
            "slower_x": med(b["turns_per_s"] / r["turns_per_s"] for b, r in pairs),
            "cpu_x": med(r["cpu_ms_per_turn"] / b["cpu_ms_per_turn"] for b, r in pairs),
            "start_s": med(r["start_s"] for r in mine),
            "failed": sum(r["failed"] for r in mine),
        }  # fmt: skip
    return out


def report(res: dict[str, Any], out: Any) -> None:
    con, by = Console(file=out, width=180), " / ".join
    t = rich_table(
        f"fleet: {res['sessions']} sessions x {res['tool_turns'] + 1} turns, 2 workers,"
        f" {res['rounds']} alternated rounds",
        ("config", "turns/s by round", "median", "1 agent ÷ this", "worker CPU ms/turn by round",
         "median", "this ÷ 1 agent", "runs w1 / w2", "starts s", "failed"),
    )  # fmt: skip
    for name, x in res["summary"].items():
        t.add_row(
            name, by(f"{v:.0f}" for v in x["turns_per_s"]),
            f"{statistics.median(x['turns_per_s']):.0f}", f"{x['slower_x']:.2f}x",
            by(f"{v:.2f}" for v in x["cpu_ms_per_turn"]),
            f"{statistics.median(x['cpu_ms_per_turn']):.2f}", f"{x['cpu_x']:.2f}x",
            by(str(n) for n in x["runs_w1_w2"]), f"{x['start_s']:.2f}", str(x["failed"]),
        )  # fmt: skip
    con.print(t)
    t = rich_table(f"idle workers, {res['idle_sec']:g} s", ("agents", "CPU % w1 / w2", "threads"))
    for name, ws in res["idle"].items():
        t.add_row(name, by(f"{w['cpu_pct']:.1f}" for w in ws), by(str(w["threads"]) for w in ws))
    if res["idle"]:
        con.print(t)


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, rounds=3, sessions=200, tool_turns=3, threads=8, warmup=20, idle=10.0)
    p.add_argument("--json", action="store_true", help="report on stderr, one JSON object")
    args = p.parse_args()
    with cli.report_to_stderr(args.json):
        res = run(args, args.database_url or LOCAL_SERVER)
        report(res, sys.stdout)
    if args.json:
        cli.print_json(res)


if __name__ == "__main__":
    main()
