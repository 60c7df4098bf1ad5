"""A real uvicorn on loopback (in a thread) and a real worker subprocess.

DBOS is never launched in the test process: the server talks to Postgres through
``AgentClient`` and the agents run in a ``dbos-agents worker`` subprocess.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import sqlalchemy as sa
import uvicorn
from fastapi import FastAPI

from dbos_agents import AgentClient, PendingCall
from dbos_agents.live import announce, deltas
from dbos_agents.testing import CrashHarness, WorkerProcess

REPO = Path(__file__).resolve().parents[2]
SECRET = "test-secret-" + "x" * 32


class LiveServer:
    """``app`` served by uvicorn on 127.0.0.1 in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_keep_alive=30)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )

    def start(self, timeout: float = 30.0) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()

    def raw(self, request: bytes, *, read_timeout: float = 5.0) -> bytes:
        """Send raw bytes on a fresh connection; the response head and body as bytes."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=read_timeout) as s:
            s.sendall(request)
            chunks = []
            while True:
                try:
                    data = s.recv(65536)
                except TimeoutError:
                    break
                if not data:
                    break
                chunks.append(data)
                if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                    break
        return b"".join(chunks)


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def auth(token: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def wait_pending(client: AgentClient, sid: str, timeout: float = 30.0) -> PendingCall:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = client.pending(session_id=sid)
        if rows:
            return rows[0]
        time.sleep(0.05)
    raise TimeoutError(f"no pending call for {sid}")


def report_progress(
    client: AgentClient,
    sid: str,
    call_id: str,
    part: int,
    fraction: float | None = None,
    *,
    tool: str = "confirm",
    deltas_only: bool = False,
) -> None:
    """Note ``part`` (``"step <part>"``) of a tool call of run 1, turn 1, as a durable
    tool's writer makes it (there is none yet): the row, then a full announcement
    (``deltas_only``: the feed's, which a stream up to date on messages reads itself)."""
    note = deltas.progress_stmt(sid, 1, 1, call_id, tool, part, f"step {part}", fraction)
    notify = announce.notify_stmt([announce.DELTAS + sid if deltas_only else sid])
    with client.engine.begin() as conn:
        for sql, params in (note, notify):
            conn.execute(sa.text(sql), params)


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.http.app:runtime",
        fresh_database_url,
        cwd=REPO,
        log_dir=tmp_path_factory.mktemp("http-logs"),
        executor_id="http-tests-worker",
    ) as h:
        yield h


@pytest.fixture(scope="module")
def worker(harness: CrashHarness) -> Iterator[WorkerProcess]:
    w = harness.start_worker()
    yield w
    w.stop()


@pytest.fixture(scope="module")
def agent_client(harness: CrashHarness) -> AgentClient:
    return harness.client


@pytest.fixture()
def http() -> Iterator[httpx.Client]:
    with httpx.Client(timeout=30.0) as c:
        yield c
