"""The test MCP server in its own process (streamable HTTP on loopback), its witness file,
and a worker harness for the app of ``tests/mcp/app.py``."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbos_agents.testing import CrashHarness
from dbos_agents.testing.cluster import free_port

REPO = Path(__file__).resolve().parents[2]


class McpServerProcess:
    """``tests/mcp/server_app.py`` on a loopback port; ``restart`` serves another variant."""

    def __init__(self, witness: Path, log: Path) -> None:
        self.witness = witness
        self.log = log
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self, variant: str = "a", state_key: str | None = None) -> None:
        key = ["--state-key", state_key] if state_key else []
        with open(self.log, "ab") as log:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "tests.mcp.server_app", "--witness", str(self.witness),
                 "--port", str(self.port), "--variant", variant, *key],
                cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                assert self.popen.poll() is None, self.log.read_text()[-2000:]
                time.sleep(0.1)
        raise TimeoutError(f"the MCP test server did not listen: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.popen is not None:
            self.popen.terminate()
            self.popen.wait(10)
            self.popen = None

    def restart(self, variant: str = "a", state_key: str | None = None) -> None:
        self.stop()
        self.start(variant, state_key)

    def executions(self, tool: str, key: str | None = None) -> int:
        """How many times the server ran ``tool`` (for the call with idempotency ``key``)."""
        if not self.witness.exists():
            return 0
        lines = [line.split() for line in self.witness.read_text().splitlines()]
        return sum(1 for t, k in lines if t == tool and (key is None or k == key))


@pytest.fixture(scope="module")
def mcp_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpServerProcess]:
    d = tmp_path_factory.mktemp("mcp-server")
    server = McpServerProcess(d / "executions.txt", d / "server.log")
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str,
    mcp_server: McpServerProcess,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[CrashHarness]:
    logs = tmp_path_factory.mktemp("mcp-logs")
    with CrashHarness(
        "tests.mcp.app:runtime",
        fresh_database_url,
        env={"MCP_TEST_URL": mcp_server.url},
        witness=logs / "model.jsonl",
        log_dir=logs,
        cwd=REPO,
        executor_id="mcp-worker",
    ) as h:
        yield h
