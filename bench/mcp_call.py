"""An MCP call through an agent against the same call made directly with the ``mcp`` SDK.

One worker (bench/mcp_app.py), one MCP server process, both on loopback; the bench's
``AgentClient`` runs sessions one at a time (start -> run's end, as the client sees it).
Per alternated round: ``direct`` (an SDK ``Client`` here, its connection kept: a run's
``tools/list`` + ``tools/call``), ``plain run`` (one call of a local no-op ``@tool``, two
model turns) and ``mcp run`` (one call of the server's no-op tool instead). What the MCP
call adds to a run, ``mcp run - plain run``, against the issue's bound: 1.3 x ``direct``
plus one recorded turn (``plain run`` / 2). Then a run of three MCP calls (four model
turns): the tool lists it recorded (one per run, not per turn).

    python bench/mcp_call.py [--rounds 3] [--runs 40] [--database-url SERVER] [--json]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Iterator
from typing import Any

import sqlalchemy as sa
from _lib import cli
from _lib.child import Child
from _lib.db import LOCAL_SERVER
from _lib.procfs import loadavg
from _lib.stats import pct
from _lib.tables import rich_table
from mcp_app import CALLS_ENV, URL_ENV
from rich.console import Console

from dbos_agents import AgentClient, Settings
from dbos_agents.testing import create_fresh_database, drop_database
from dbos_agents.testing.cluster import free_port

DB = "dbos_agents_bench_mcp"
HERE = os.path.dirname(os.path.abspath(__file__))
LISTS_SQL = (  # the lists a run recorded (with its first model turn), and its model turns
    "SELECT count(*) FILTER (WHERE jsonb_typeof(response->'tools') = 'array'), count(*)"
    " FROM dbos_agents.usage WHERE session_id = :w"
)


@contextlib.contextmanager
def setup(server: str, calls: int) -> Iterator[tuple[AgentClient, str]]:
    """An MCP server, a worker and a client on a fresh database; all gone afterwards."""
    url, port = create_fresh_database(server, DB), free_port()
    mcp_url = f"http://127.0.0.1:{port}/mcp"
    env = {k: v for k, v in os.environ.items() if not k.startswith("DBOS_AGENTS_")}
    env |= {"PYTHONPATH": os.pathsep.join(filter(None, [HERE, env.get("PYTHONPATH")])),
            "DBOS_AGENTS_DATABASE_URL": url, "DBOS_AGENTS_LOG_LEVEL": "WARNING",
            URL_ENV: mcp_url, CALLS_ENV: str(calls)}  # fmt: skip
    mcp = Child([sys.executable, os.path.join(HERE, "mcp_app.py"), str(port)], env=env)
    worker = Child(
        [sys.executable, "-m", "dbos_agents.cli", "worker", "--app", "mcp_app:runtime"], env=env
    )
    try:
        worker.expect("dbos-agents worker ready", 300)
        with AgentClient(url, settings=Settings(log_level="WARNING")) as client:
            yield client, mcp_url
    finally:
        worker.stop(30)
        mcp.stop(10)
        drop_database(server, DB)


def timed_runs(client: AgentClient, agent: str, n: int) -> list[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        sid = client.start(agent, "go")
        info = client.wait(sid, timeout=60)
        out.append((time.perf_counter() - t0) * 1000)
        assert info.status == "completed", info
    return out


async def direct(url: str, n: int) -> list[float]:
    """``tools/list`` + ``tools/call`` on one kept SDK connection, as a run makes them."""
    from mcp import Client

    async with Client(url, cache=None) as c:
        out = []
        for i in range(n + 5):
            t0 = time.perf_counter()
            await c.list_tools()
            await c.call_tool("stamp", {"note": f"n{i}"})
            if i >= 5:  # the first few warm the connection
                out.append((time.perf_counter() - t0) * 1000)
    return out


def run(args: Any, server: str) -> dict[str, Any]:
    rounds: list[dict[str, float]] = []
    with setup(server, 1) as (client, url):
        timed_runs(client, "mcp", 5), timed_runs(client, "plain", 5)  # warm both paths
        for r in range(args.rounds):
            res: dict[str, float] = {}
            order = ["direct", "plain run", "mcp run"]
            for name in order[r % 3 :] + order[: r % 3]:
                xs = (
                    asyncio.run(direct(url, args.runs))
                    if name == "direct"
                    else timed_runs(client, name.split()[0], args.runs)
                )
                res[name] = pct(xs, 50)
            rounds.append(res)
            print(f"[mcp] round {r + 1}:", res, file=sys.stderr, flush=True)
    with setup(server, 3) as (client, _):
        sid = client.start("mcp", "go")
        client.wait(sid, timeout=60)
        with client.engine.connect() as conn:
            lists, turns = conn.execute(sa.text(LISTS_SQL), {"w": sid}).one()
    return {"rounds": rounds, "runs": args.runs, "lists_recorded": lists, "turns": turns,
            "loadavg": loadavg(), "versions": cli.versions("mcp")}  # fmt: skip


def report(res: dict[str, Any], out: Any) -> None:
    t = rich_table(
        f"an MCP call through an agent, p50 ms of {res['runs']} sequential runs per round",
        ("round", "direct list+call", "plain run", "mcp run", "added (mcp - plain)",
         "bound 1.3x direct + turn", "added ÷ bound"),
    )  # fmt: skip
    for i, r in enumerate(res["rounds"], 1):
        added, bound = r["mcp run"] - r["plain run"], 1.3 * r["direct"] + r["plain run"] / 2
        t.add_row(str(i), f"{r['direct']:.2f}", f"{r['plain run']:.2f}", f"{r['mcp run']:.2f}",
                  f"{added:.2f}", f"{bound:.2f}", f"{added / bound:.2f}")  # fmt: skip
    ratios = [
        (r["mcp run"] - r["plain run"]) / (1.3 * r["direct"] + r["plain run"] / 2)
        for r in res["rounds"]
    ]
    con = Console(file=out, width=160)
    con.print(t)
    con.print(f"median added ÷ bound: {statistics.median(ratios):.2f} (goal <= 1.00)"
              f"; a run of 3 MCP calls recorded {res['lists_recorded']} tool list(s)"
              f" in {res['turns']} model turns")  # fmt: skip


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p, from_env=True)
    cli.options(p, rounds=3, runs=40)
    p.add_argument("--json", action="store_true", help="report on stderr, one JSON object")
    args = p.parse_args()
    with cli.report_to_stderr(args.json):
        res = run(args, args.database_url or LOCAL_SERVER)
        report(res, sys.stdout)
    if args.json:
        cli.print_json(res)


if __name__ == "__main__":
    main()
