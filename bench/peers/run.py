"""Durable peers on the same scripted conversation, ms per turn, in one run.

Runs under the dbos-agents venv; the peers run as subprocesses under bench/peers/.venv
(setup.sh), so they never become a dependency of dbos-agents. Each peer gets a fresh
database; the ratios divide by the raw-DBOS floor measured in the Pydantic AI peer's process.
``--pg-sessions K`` adds each peer's Postgres figures per turn, from a window of K sessions
in its ``--concurrent`` mode (bench/_lib/pgwatch.py; 0 skips it).

    .venv/bin/python bench/peers/run.py [--server-url URL] [--sessions 20] [--turns 10]
        [--pg-sessions 10] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from dbos_agents.testing import create_fresh_database, drop_database

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # bench/, for _lib
from _lib.db import LOCAL_SERVER  # noqa: E402
from _lib.labels import LANGGRAPH  # noqa: E402
from _lib.pgwatch import per_turn_pg  # noqa: E402
from _lib.render import show, turn_rows, turn_table  # noqa: E402

PEERS_PYTHON = HERE / ".venv" / "bin" / "python"
# script -> (database it gets, created fresh for each run; its window's system, the row)
PEERS: dict[str, tuple[str, str, str]] = {
    "pydantic_ai_dbos.py": (
        "dbos_agents_peers_pydantic_ai", "pydantic_ai", "Pydantic AI + DBOS (capability, tool as step)"
    ),
    "langgraph_pg.py": ("dbos_agents_peers_langgraph", "langgraph", LANGGRAPH),
}  # fmt: skip
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
    cmd = [str(PEERS_PYTHON), str(HERE / script), "--database-url", database_url]
    cmd += ["--sessions", str(sessions), "--turns", str(turns)]
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


def run_peers(
    server_url: str, sessions: int, turns: int = 10, pg_sessions: int = 0
) -> list[dict[str, Any]]:
    """Every peer's rows (see _common.emit), each measured on its own fresh database, and
    with ``pg_sessions`` each peer's Postgres figures per turn (``pg``) from a window of
    that many sessions one after another (bench/_lib/pgwatch.py).

    ``server_url`` is any database URL on the server (its database part names where
    CREATE DATABASE runs). The databases are dropped afterwards.
    """
    ensure_peers_venv()
    rows: list[dict[str, Any]] = []
    for script, (db, system, label) in PEERS.items():
        url = create_fresh_database(server_url, db)
        try:
            rows.extend(run_peer(script, url, sessions, turns))
        finally:
            drop_database(server_url, db)
        if pg_sessions:
            row = next(r for r in rows if r["system"] == label)
            row["pg"] = per_turn_pg(server_url, f"{db}_pg", system, pg_sessions, turns)
    return rows


def print_table(rows: list[dict[str, Any]]) -> None:
    """The report's per-turn table, ratios against the floor measured in the same run."""
    show([turn_table(turn_rows({"turn_overhead": {"rows": []}, "peers": rows}))])
    versions = {k: v for r in rows for k, v in r["versions"].items()}
    print("versions: " + ", ".join(f"{k} {v}" for k, v in sorted(versions.items())))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    server = os.environ.get("DBOS_AGENTS_BENCH_SERVER_URL", LOCAL_SERVER)
    p.add_argument("--server-url", default=server, help="fresh databases are created there")
    p.add_argument("--sessions", type=int, default=20)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--pg-sessions", type=int, default=10, help="the Postgres window (0: none)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON lines instead")
    args = p.parse_args()
    rows = run_peers(args.server_url, args.sessions, args.turns, args.pg_sessions)
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print_table(rows)


if __name__ == "__main__":
    main()
