"""Interop with the reference MCP server (``@modelcontextprotocol/server-everything``, the
TypeScript SDK's, on its own protocol version) over stdio and streamable HTTP: its tools are
listed for the run, called, and a call its schema refuses is stopped before it."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbos_agents.testing import CrashHarness
from dbos_agents.testing.cluster import free_port

from .everything_app import SERVER

pytestmark = [pytest.mark.integration]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def everything_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    node = shutil.which("node")
    if node is None or not SERVER.exists():
        pytest.fail("the reference MCP server is not installed: run `npm ci --prefix js`")
    port = free_port()
    log = tmp_path_factory.mktemp("everything") / "server.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [node, str(SERVER), "streamableHttp"],
            env={**os.environ, "PORT": str(port)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, everything_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.mcp.everything_app:runtime",
        fresh_database_url,
        env={"MCP_EVERYTHING_URL": everything_url},
        log_dir=tmp_path_factory.mktemp("everything-logs"),
        cwd=REPO,
        executor_id="everything-worker",
    ) as h:
        worker = h.start_worker()
        worker.wait_ready()
        try:
            yield h
        finally:
            worker.stop()


@pytest.mark.parametrize("agent", ["everything_stdio", "everything_http"])
def test_the_reference_server_lists_calls_and_refuses_bad_arguments(
    harness: CrashHarness, agent: str
) -> None:
    sid = harness.client.start(agent, "go")
    info = harness.client.wait(sid, timeout=90)
    assert info.status == "completed", info
    listed, added, refused = (info.final_output or "").split("\n---\n")
    assert listed.startswith("Echo: tools: ") and "get-sum" in listed and "echo" in listed
    assert "The sum of 2 and 40 is 42" in added, added
    assert "invalid-arguments" in refused and "message" in refused, refused
    calls = {c.tool_call_id: c for c in harness.client.tool_calls(sid)}
    assert sorted(c.status for c in calls.values()) == ["completed", "completed", "failed"]
