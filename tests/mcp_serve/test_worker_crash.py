"""An agent called as an MCP tool survives a SIGKILL of its worker while it waits on the
MCP client, and the answer may reach another ``serve`` process than the one that asked.

Real processes throughout: a ``dbos-agents worker`` (killed by SIGKILL while the run waits
on the client tool, then a new one started with the same executor id) and two
``dbos-agents serve --mcp`` processes sharing only the database and the secret (the one
that asked is SIGKILLed too; its ``requestState`` is answered on the other).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from dbos_agents.server.mcp.catalogue import SESSION_META
from dbos_agents.testing import CrashHarness
from dbos_agents.testing.cluster import free_port

from .conftest import REPO, SECRET, mcp_client
from .test_agents_as_tools import answering, got

pytestmark = [pytest.mark.integration, pytest.mark.crash]


class ServeProcess:
    """``dbos-agents serve --mcp`` on a loopback port of its own."""

    def __init__(self, url: str, log: Path) -> None:
        self.port = free_port()
        self.mcp_url = f"http://127.0.0.1:{self.port}/mcp"
        env = {
            **os.environ,
            "DBOS_AGENTS_SERVER_SECRET": SECRET,
            "DBOS_AGENTS_SERVER_MCP_AGENTS": "tests.mcp_serve.app:AGENTS",
        }
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                [sys.executable, "-m", "dbos_agents.cli", "serve", "--mcp",
                 "--allow-unauthenticated", "--port", str(self.port), "--database-url", url],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.log = log
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.popen.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise TimeoutError(log.read_text()[-3000:])

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(10)

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture()
def serve_pair(
    fresh_database_url: str, tmp_path: Path
) -> Iterator[tuple[ServeProcess, ServeProcess]]:
    a = ServeProcess(fresh_database_url, tmp_path / "serve-a.log")
    try:
        b = ServeProcess(fresh_database_url, tmp_path / "serve-b.log")
    except BaseException:
        a.stop()
        raise
    yield a, b
    a.stop()
    b.stop()


def _waiting(harness: CrashHarness, sid: str) -> bool:
    return any(p.status == "waiting" for p in harness.client.pending(session_id=sid))


def test_input_required_answered_after_the_worker_and_the_server_were_killed(
    harness: CrashHarness, serve_pair: tuple[ServeProcess, ServeProcess]
) -> None:
    asking, answering_server = serve_pair
    first = harness.start_worker()
    first.wait_ready()
    callback = answering(lambda _: types.ElicitResult(action="accept", content={}), [])

    async def ask() -> types.InputRequiredResult:
        async with mcp_client(asking.mcp_url, elicitation_callback=callback) as c:
            asked = await c.session.call_tool(
                "asker", {"message": "still there?"}, allow_input_required=True
            )
        assert isinstance(asked, types.InputRequiredResult)
        return asked

    asked = asyncio.run(ask())
    sid = (asked.meta or {})[SESSION_META]
    assert _waiting(harness, sid)
    first.kill()  # SIGKILL while the run waits on the MCP client
    asking.kill()  # and the server process that asked
    (key,) = (asked.input_requests or {}).keys()

    async def answer() -> types.CallToolResult:
        async with mcp_client(answering_server.mcp_url, elicitation_callback=callback) as c:
            call = asyncio.ensure_future(
                c.session.call_tool(
                    "asker",
                    {"message": "still there?"},
                    input_responses={
                        key: types.ElicitResult(
                            action="accept", content={"ok": True, "note": "yes"}
                        )
                    },
                    request_state=asked.request_state,
                    allow_input_required=True,
                )
            )
            await asyncio.sleep(1.0)  # the answer is submitted while no worker lives
            assert not call.done()
            second = await asyncio.to_thread(harness.start_worker)  # same executor id: recovers
            try:
                done = await asyncio.wait_for(call, 120)
            finally:
                second.stop()
        assert isinstance(done, types.CallToolResult)
        return done

    done = asyncio.run(answer())
    assert (done.meta or {})[SESSION_META] == sid
    assert got(done, "asker") == {"ok": True, "note": "yes"}
    info = harness.client.session(sid)
    assert info.status == "completed" and info.turns == 2
    (call,) = harness.client.tool_calls(sid)
    assert call.tool == "confirm" and call.status == "completed"


def test_a_mid_call_question_outlives_the_worker_on_the_previous_protocol(
    harness: CrashHarness, serve_pair: tuple[ServeProcess, ServeProcess]
) -> None:
    """2025-11-25: the question arrives in the middle of the call; the worker dies before
    the user answers; a new worker takes the answer and the call returns the answer."""
    server, _ = serve_pair
    first = harness.start_worker()
    first.wait_ready()
    workers: list[Any] = [first]

    async def slow_user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        first.kill()  # SIGKILL while the question is on screen
        workers.append(await asyncio.to_thread(harness.start_worker))
        return types.ElicitResult(action="accept", content={"ok": True, "note": "later"})

    async def scenario() -> types.CallToolResult:
        async with mcp_client(server.mcp_url, mode="legacy", elicitation_callback=slow_user) as c:
            return await asyncio.wait_for(c.call_tool("asker", {"message": "old client"}), 120)

    try:
        result = asyncio.run(scenario())
    finally:
        for w in workers:
            w.stop()
    assert got(result, "asker") == {"ok": True, "note": "later"}
    assert harness.client.session((result.meta or {})[SESSION_META]).status == "completed"
    assert first.popen.returncode == -signal.SIGKILL
