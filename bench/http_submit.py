"""HTTP submit throughput: 8 concurrent httpx clients against ``dbos-agents serve``, and the
same submits made directly through ``AgentClient.submit_tool_result`` from 8 threads (the
raw floor), measured in the same run.

Processes: a worker subprocess (``dbos-agents worker --app http_submit:runtime``, the agent
below), the HTTP server in a subprocess (``dbos_agents.server.serve``, settings from the
environment), and this process, which drives both and never launches DBOS.

Per round: create N sessions of the agent ``asker`` (its turn 0 calls the client tool
``confirm``), wait until all N have a pending call, then release the 8 clients at once; each
submits its share of the N results. Throughput is N / (time from release to the last
answer); latency is each submit request's round trip as the client saw it. Every submit
must answer ``accepted``. Before the next round the worker finishes the resumed sessions,
so each burst starts from the same idle state (the worker does resume sessions *during*
each burst, in both paths alike). The two paths alternate, ``--rounds`` times each.

    python bench/http_submit.py [--database-url URL] [--sessions 200] [--clients 8]
        [--rounds 2]

Without --database-url it uses the local server at 127.0.0.1:5432 (database
dbos_agents_bench_http, recreated).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import httpx
import sqlalchemy as sa
from _lib import cli
from _lib.asker import AGENT, confirm, respond
from _lib.db import database_url, scalar
from _lib.procfs import cpu_seconds
from _lib.serve import wait_healthy
from _lib.stats import pct
from _lib.tables import rich_table
from _lib.timing import wait_until
from rich.console import Console

from dbos_agents import Agent, AgentRuntime
from dbos_agents.client import AgentClient
from dbos_agents.models import ScriptedModel
from dbos_agents.testing import CrashHarness, WorkerProcess
from dbos_agents.testing.cluster import free_port

HERE = Path(__file__).resolve().parent
SECRET = "bench-secret-" + "b" * 32
console = Console(width=130)


# ------------------------------------------------------------------------- the worker's app


def runtime() -> AgentRuntime:
    """The worker subprocess's app: ``http_submit:runtime`` (cwd = bench/)."""
    asker = Agent(AGENT, "asks", tools=[confirm], tool_timeout=timedelta(minutes=30))
    return AgentRuntime([asker], ScriptedModel(respond=respond))


# ------------------------------------------------------------------------------ measuring


@dataclass
class Burst:
    path: str
    wall: float
    latencies: list[float]
    outcomes: dict[str, int]
    cpu: dict[str, float]
    """CPU seconds spent during the burst, by process."""

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall


@dataclass(frozen=True)
class Waiting:
    session_id: str
    tool_call_id: str
    token: str | None


def burst(
    path: str,
    items: list[Waiting],
    clients: int,
    submit: Callable[[int, Waiting], str],
    processes: dict[str, int],
) -> Burst:
    """Release ``clients`` threads at once; thread i submits items i, i+clients, ..."""
    barrier = threading.Barrier(clients + 1)
    latencies: list[list[float]] = [[] for _ in range(clients)]
    outcomes: list[list[str]] = [[] for _ in range(clients)]

    def run(i: int) -> None:
        barrier.wait()
        for item in items[i::clients]:
            t0 = time.perf_counter()
            try:
                outcome = submit(i, item)
            except Exception as exc:  # counted, so a failure shows in the table
                outcome = f"error {type(exc).__name__}"
            latencies[i].append(time.perf_counter() - t0)
            outcomes[i].append(outcome)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    cpu0 = {name: cpu_seconds(pid) for name, pid in processes.items()}
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    cpu = {name: cpu_seconds(pid) - cpu0[name] for name, pid in processes.items()}
    counts: dict[str, int] = {}
    for o in (o for per in outcomes for o in per):
        counts[o] = counts.get(o, 0) + 1
    return Burst(path, wall, [x for per in latencies for x in per], counts, cpu)


@contextmanager
def frozen(worker: WorkerProcess, enabled: bool) -> Iterator[None]:
    """SIGSTOP the worker for the burst: the submits are measured, not the resumed runs
    competing with them for this machine's 2 cores. The messages wait in Postgres."""
    if enabled:
        os.kill(worker.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        if enabled:
            os.kill(worker.pid, signal.SIGCONT)


# ------------------------------------------------------------------------------ processes


def start_server(url: str, port: int, log_path: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "DBOS_AGENTS_SERVER_DATABASE_URL": url,
        "DBOS_AGENTS_SERVER_SECRET": SECRET,
        "DBOS_AGENTS_SERVER_ALLOW_UNAUTHENTICATED": "1",
        "DBOS_AGENTS_SERVER_PORT": str(port),
        "DBOS_AGENTS_SERVER_LOG_LEVEL": "warning",
    }
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            [sys.executable, "-c", "from dbos_agents.server import serve; serve()"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def busy_sessions(engine: sa.Engine) -> int:
    sql = "SELECT count(*) FROM dbos_agents.sessions WHERE status IN ('queued', 'running')"
    return int(scalar(engine, sql))


def create_sessions(
    n: int, clients: int, start: Callable[[int], tuple[str, str | None]]
) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    lock = threading.Lock()

    def run(i: int) -> None:
        for k in range(i, n, clients):
            sid, token = start(k)
            with lock:
                out[sid] = token

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return out


def wait_pending(client: AgentClient, tokens: dict[str, str | None]) -> list[Waiting]:
    found: dict[str, Waiting] = {}

    def all_pending() -> bool:
        for p in client.pending(limit=100_000):
            if p.root_session_id in tokens:
                found[p.root_session_id] = Waiting(
                    p.root_session_id, p.tool_call_id, tokens[p.root_session_id]
                )
        return len(found) == len(tokens)

    wait_until("sessions never reached their client tool", all_pending)
    return sorted(found.values(), key=lambda w: w.session_id)


# ---------------------------------------------------------------------------------- rounds

HTTP_PATH = "HTTP: httpx -> uvicorn -> AgentClient"
FLOOR_PATH = "floor: AgentClient direct"


@dataclass
class Bench:
    base_url: str
    client: AgentClient
    worker: WorkerProcess
    server: subprocess.Popen[bytes]
    sessions: int
    clients: int
    freeze_worker: bool

    def http_round(self) -> Burst:
        pool = [httpx.Client(base_url=self.base_url, timeout=60) for _ in range(self.clients)]
        try:

            def start(k: int) -> tuple[str, str | None]:
                r = pool[k % self.clients].post("/sessions", json={"agent": AGENT, "message": "go"})
                r.raise_for_status()
                body = r.json()
                return body["session_id"], body["token"]

            items = wait_pending(self.client, create_sessions(self.sessions, self.clients, start))
            for c in pool:  # warm every connection: the burst measures no TCP handshake
                c.get("/healthz")

            def submit(i: int, w: Waiting) -> str:
                r = pool[i].post(
                    f"/sessions/{w.session_id}/submit-tool-result",
                    json={
                        "kind": "client-tool-result",
                        "tool_call_id": w.tool_call_id,
                        "result": {"ok": True},
                    },
                    headers={"Authorization": f"Bearer {w.token}"},
                )
                return str(r.json().get("status", r.status_code))

            with frozen(self.worker, self.freeze_worker):
                return burst(HTTP_PATH, items, self.clients, submit, self.processes())
        finally:
            for c in pool:
                c.close()

    def direct_round(self) -> Burst:
        def start(k: int) -> tuple[str, str | None]:
            return self.client.start(AGENT, "go"), None

        items = wait_pending(self.client, create_sessions(self.sessions, self.clients, start))

        def submit(i: int, w: Waiting) -> str:
            out = self.client.submit_tool_result(w.session_id, w.tool_call_id, result={"ok": True})
            return out.status

        with frozen(self.worker, self.freeze_worker):
            return burst(FLOOR_PATH, items, self.clients, submit, self.processes())

    def processes(self) -> dict[str, int]:
        return {"bench": os.getpid(), "server": self.server.pid, "worker": self.worker.pid}

    def settle(self) -> None:
        wait_until(
            "resumed sessions never finished", lambda: busy_sessions(self.client.engine) == 0
        )


def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p)
    cli.options(p, sessions=200, clients=8, rounds=2)
    p.add_argument(
        "--live-worker",
        action="store_true",
        help="keep the worker running during bursts (it then resumes sessions concurrently)",
    )
    args = p.parse_args()
    url = database_url(args.database_url, "dbos_agents_bench_http")
    logs = Path(tempfile.mkdtemp(prefix="bench-http-"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    bursts: list[Burst] = []
    with CrashHarness(
        "http_submit:runtime", url, cwd=HERE, log_dir=logs, executor_id="bench-http-worker"
    ) as harness:
        worker = harness.start_worker()
        server = start_server(url, port, logs / "server.log")
        try:
            wait_healthy(base, server, log=logs / "server.log")
            bench = Bench(
                base,
                harness.client,
                worker,
                server,
                args.sessions,
                args.clients,
                freeze_worker=not args.live_worker,
            )
            for r in range(args.rounds):
                for path, run in (("floor", bench.direct_round), ("HTTP", bench.http_round)):
                    t0 = time.perf_counter()
                    bursts.append(run())
                    bench.settle()
                    console.print(
                        f"round {r + 1} {path}: {args.sessions} sessions started, armed,"
                        f" answered and finished in {time.perf_counter() - t0:.1f} s",
                        style="dim",
                    )
        finally:
            server.terminate()
            server.wait(timeout=15)
            worker.stop()
    report(bursts, args)


def report(bursts: list[Burst], args: argparse.Namespace) -> None:
    mode = "live worker" if args.live_worker else "worker paused during bursts"
    cols = ("path", "round", "submits/s", "p50 ms", "p99 ms", "wall s")
    cpu_cols = ("CPU ms/submit: bench", "server", "worker")
    table = rich_table(
        f"submit throughput: {args.sessions} waiting sessions,"
        f" {args.clients} concurrent clients, {mode}",
        (*cols, *cpu_cols, "outcomes"),
        left=("path", "outcomes"),
    )
    rounds: dict[str, int] = {}
    for b in bursts:
        rounds[b.path] = rounds.get(b.path, 0) + 1
        n = len(b.latencies)
        table.add_row(
            b.path,
            str(rounds[b.path]),
            f"{b.rate:.0f}",
            f"{pct(b.latencies, 50) * 1000:.1f}",
            f"{pct(b.latencies, 99) * 1000:.1f}",
            f"{b.wall:.2f}",
            *(f"{b.cpu[k] / n * 1000:.1f}" for k in ("bench", "server", "worker")),
            ", ".join(f"{k} {v}" for k, v in sorted(b.outcomes.items())),
        )
    console.print(table)
    summary: dict[str, tuple[float, list[float]]] = {}
    for path in (HTTP_PATH, FLOOR_PATH):
        mine = [b for b in bursts if b.path == path]
        lat = [x for b in mine for x in b.latencies]
        summary[path] = (len(lat) / sum(b.wall for b in mine), lat)
        console.print(
            f"{path}: {summary[path][0]:.0f} submits/s, p50 {pct(lat, 50) * 1000:.1f} ms,"
            f" p99 {pct(lat, 99) * 1000:.1f} ms (all rounds)"
        )
    ratio = summary[FLOOR_PATH][0] / summary[HTTP_PATH][0]
    console.print(f"ratio {ratio:.2f}  (floor submits/s / HTTP submits/s)")
    bad = {k: v for b in bursts for k, v in b.outcomes.items() if k != "accepted"}
    if bad:
        console.print(f"[red]not accepted: {bad}[/red]")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
