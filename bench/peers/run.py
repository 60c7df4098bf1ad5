"""Durable peers on the same scripted conversation, ms per turn, in one run.

Runs under the dbos-agents venv. The peers themselves (Pydantic AI + DBOS, LangGraph +
AsyncPostgresSaver) run as subprocesses under bench/peers/.venv, which setup.sh creates from
requirements.txt: they are never a dependency of dbos-agents. Each peer gets a fresh database
on the given server, warms up one session, then times ``--sessions`` sessions of ``--turns``
tool-calling turns plus an answer, and prints one JSON line per system; this collects them and
prints a table with ratios against the raw-DBOS floor (2 trivial async steps per turn)
measured in the same run, in the Pydantic AI peer's process.

    .venv/bin/python bench/peers/run.py [--server-url URL] [--sessions 20] [--turns 10]

``run_peers(server_url, sessions)`` returns the same rows for bench/all.py to merge with its
own measurements (``from peers.run import run_peers``: bench/ is on sys.path when a script
in it runs, and peers/ imports as a namespace package).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from dbos_agents.testing import create_fresh_database, drop_database

HERE = Path(__file__).resolve().parent
PEERS_PYTHON = HERE / ".venv" / "bin" / "python"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
# script -> database it gets, created fresh for each run
PEERS: dict[str, str] = {
    "pydantic_ai_dbos.py": "dbos_agents_peers_pydantic_ai",
    "langgraph_pg.py": "dbos_agents_peers_langgraph",
}
PEER_TIMEOUT_SEC = 900


class PeerError(RuntimeError):
    """A peer script failed or printed no result; carries its stderr tail."""


def ensure_peers_venv() -> Path:
    """Create or update bench/peers/.venv (no-op when requirements.txt is already installed).

    Returns the peers' python. The venv is built from the interpreter running this script
    unless PYTHON is set, so the peers run the same Python version as dbos-agents.
    """
    env = {**os.environ}
    env.setdefault("PYTHON", getattr(sys, "_base_executable", sys.executable))
    subprocess.run(["bash", str(HERE / "setup.sh")], check=True, env=env)
    return PEERS_PYTHON


def run_peer(script: str, database_url: str, sessions: int, turns: int) -> list[dict[str, Any]]:
    """Run one peer script under the peers venv and parse its JSON result lines."""
    cmd = [
        str(PEERS_PYTHON),
        str(HERE / script),
        "--database-url",
        database_url,
        "--sessions",
        str(sessions),
        "--turns",
        str(turns),
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env=env, cwd=HERE, timeout=PEER_TIMEOUT_SEC
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not rows:
        tail = "\n".join(proc.stderr.splitlines()[-30:])
        raise PeerError(f"{script} exited {proc.returncode} with {len(rows)} results:\n{tail}")
    for row in rows:
        row["script"] = script
    return rows


def run_peers(server_url: str, sessions: int, turns: int = 10) -> list[dict[str, Any]]:
    """Every peer's rows (see _common.emit), each measured on its own fresh database.

    ``server_url`` is any database URL on the server (its database part names where
    CREATE DATABASE runs). The databases are dropped afterwards.
    """
    ensure_peers_venv()
    rows: list[dict[str, Any]] = []
    for script, db in PEERS.items():
        url = create_fresh_database(server_url, db)
        try:
            rows.extend(run_peer(script, url, sessions, turns))
        finally:
            drop_database(server_url, db)
    return rows


def floor_of(rows: list[dict[str, Any]]) -> float | None:
    """The raw-DBOS floor's median from the same run, if one was measured."""
    return next((r["ms_per_turn_median"] for r in rows if r.get("floor")), None)


def print_table(rows: list[dict[str, Any]], console: Console | None = None) -> None:
    """Rows sorted by median, with the ratio against the floor measured in the same run."""
    console = console or Console()
    floor = floor_of(rows)
    first = rows[0]
    table = Table(
        title=(
            f"durable peers: ms per turn ({first['sessions']} sessions x {first['turns']} "
            "tool turns + answer)"
        )
    )
    for col in ("system", "median", "p90", "min", "x floor"):
        table.add_column(col, justify="left" if col == "system" else "right")
    for r in sorted(rows, key=lambda r: r["ms_per_turn_median"]):
        table.add_row(
            r["system"],
            f"{r['ms_per_turn_median']:.2f}",
            f"{r['ms_per_turn_p90']:.2f}",
            f"{r['ms_per_turn_min']:.2f}",
            f"{r['ms_per_turn_median'] / floor:.2f}" if floor else "-",
        )
    console.print(table)
    console.print(
        "agent systems: session wall time / model calls (turns + 1); "
        "floor: wall time / turns, 2 DBOS steps each"
    )
    versions: dict[str, str] = {}
    for r in rows:
        versions.update(r["versions"])
    console.print("versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--server-url",
        default=os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", DEFAULT_SERVER),
        help="a database URL on the Postgres server where fresh databases are created",
    )
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--json", action="store_true", help="print the rows as JSON lines instead")
    args = p.parse_args()
    rows = run_peers(args.server_url, args.sessions, args.turns)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
