"""The worker and server of the live benches (bench/streaming.py, bench/chat_ui.py): a fresh
database, a worker whose model stamps each piece as it leaves the adapter, and
``dbos-agents serve``, each a process of its own so each one's CPU is its own.

The model's pieces are ``"<i>:<unix time>;"``, stamped right before their ``yield``; a
reader subtracts the stamp from its clock when the piece arrives.

- ``stamp``: waits ``--lead-ms`` plus a random 0..``--jitter-ms`` (so every reader is
  connected first), then yields ``--pieces`` pieces, one every ``--pace-ms``.
- ``asker``: its first turn calls the client tool ``confirm``; its second streams the
  pieces at once (no lead: a client tool's round trip is timed through it).

    python -m _lib.live --database-url URL [--pieces 20] [--pace-ms 50] [--lead-ms 500]
        [--jitter-ms 50]    # the worker (PYTHONPATH=bench); prints READY, SIGTERM stops it
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx

from _lib import cli
from _lib.asker import confirm
from _lib.child import Child
from dbos_agents import Agent, AgentRuntime, ModelResponse, Settings, ToolCall
from dbos_agents.models import Completed, ModelEvent, ModelRequest, TextDelta, ToolCallDelta

BENCH = Path(__file__).resolve().parents[1]
STAMP, ASKER = "stamp", "asker"
CALL_ID, TOOL = "call_confirm", "confirm"
ARGS = '{"question": "go ahead?"}'
"""The tool call ``asker``'s first turn makes, its arguments as text."""


def piece(i: int) -> str:
    """Piece ``i``, stamped now."""
    return f"{i}:{time.time():.6f};"


def stamps(text: str) -> list[float]:
    """The stamps of the pieces in ``text``."""
    return [float(p.rpartition(":")[2]) for p in text.split(";") if p]


class StampedModel:
    def __init__(self, pieces: int, pace_ms: float, lead_ms: float, jitter_ms: float) -> None:
        self.pieces, self.pace = pieces, pace_ms / 1000
        self.lead, self.jitter = lead_ms / 1000, jitter_ms / 1000

    name = "stamped"
    continues = False

    async def complete(self, request: ModelRequest) -> ModelResponse:
        return ModelResponse(text="not streamed")

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        if request.agent == ASKER and not any(m.role == "assistant" for m in request.messages):
            yield ToolCallDelta(index=0, id=CALL_ID, name=TOOL, arguments=ARGS)
            tool_call = ToolCall(id=CALL_ID, name=TOOL, arguments=ARGS)
            yield Completed(response=ModelResponse(tool_calls=[tool_call], model=self.name))
            return
        if request.agent == STAMP:
            await asyncio.sleep(self.lead + random.random() * self.jitter)
        text = ""
        for i in range(self.pieces):
            if i:
                await asyncio.sleep(self.pace)
            p = piece(i)
            text += p
            yield TextDelta(text=p)
        yield Completed(response=ModelResponse(text=text, model=self.name))


def worker_args(pieces: int, pace_ms: float, lead_ms: float, jitter_ms: float) -> list[str]:
    return [
        *("--pieces", str(pieces), "--pace-ms", str(pace_ms)),
        *("--lead-ms", str(lead_ms), "--jitter-ms", str(jitter_ms)),
    ]


def bench_child(cmd: list[str], env: dict[str, str] | None = None) -> Child:
    """``python -m <module of bench/> ...`` in a process of its own."""
    env = dict(env or os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(BENCH), env.get("PYTHONPATH")]))
    return Child([sys.executable, "-m", *cmd], env=env)


def wait_healthy(
    base: str,
    proc: subprocess.Popen[bytes] | None = None,
    *,
    log: Path | None = None,
    timeout: float = 60.0,
) -> None:
    """Until ``GET {base}/healthz`` is 200; ``proc``: the server's process (its exit ends
    the wait with its ``log``'s tail)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            tail = log.read_text()[-2000:] if log is not None and log.exists() else ""
            raise RuntimeError(f"dbos-agents serve exited {proc.returncode}: {tail}")
        try:
            if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise TimeoutError(f"{base} did not become healthy in {timeout:.0f} s")


@contextlib.contextmanager
def processes(
    server_url: str, db_name: str, args: list[str], server_workers: int = 1
) -> Iterator[tuple[str, Child, int]]:
    """A fresh database, the worker (``args``: ``worker_args``) and ``dbos-agents serve`` on
    it: (base URL, worker, server pid); both stopped and the database dropped afterwards."""
    from dbos_agents.testing import create_fresh_database, drop_database
    from dbos_agents.testing.cluster import free_port

    url = create_fresh_database(server_url, db_name)
    env = {
        **os.environ,
        "DBOS_AGENTS_DATABASE_URL": url,
        "DBOS_AGENTS_SERVER_SECRET": secrets.token_urlsafe(32),
    }
    port = free_port()
    worker = bench_child(["_lib.live", "--database-url", url, *args], env)
    server = subprocess.Popen(
        [
            *(sys.executable, "-m", "dbos_agents.cli", "serve", "--allow-unauthenticated"),
            *("--port", str(port), "--database-url", url),
            *("--workers", str(server_workers)),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=open(os.environ.get("BENCH_SERVER_LOG", os.devnull), "w"),  # noqa: SIM115
    )
    base = f"http://127.0.0.1:{port}"
    try:
        worker.expect("READY", 120)
        wait_healthy(base, server)
        yield base, worker, server.pid
    finally:
        server.terminate()
        worker.stop(60)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        drop_database(server_url, db_name)


async def main() -> None:
    p = cli.parser(__doc__)
    cli.add_database_url(p)
    cli.options(p, pieces=20, pace_ms=50.0, lead_ms=500.0, jitter_ms=50.0)
    args = p.parse_args()
    runtime = AgentRuntime(
        [Agent(STAMP), Agent(ASKER, tools=[confirm], max_turns=3)],
        StampedModel(args.pieces, args.pace_ms, args.lead_ms, args.jitter_ms),
        settings=Settings(database_url=args.database_url, executor_id="bench-live"),
    )
    await runtime.launch()
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print("READY", flush=True)
    await stop.wait()
    await runtime.shutdown()


if __name__ == "__main__":
    asyncio.run(main())
