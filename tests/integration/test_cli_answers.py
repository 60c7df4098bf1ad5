"""``pending`` and ``show`` say what answer a wait expects, and the ``submit`` line they
print is accepted when pasted as printed (it failed with exit 6 for README's example)."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from dbos_agents import AgentClient, AgentRuntime

from .test_client_tools import _pending

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    """As a user in an 80-column terminal would run it (stdout is a pipe here)."""
    return subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "80"},
    )


def _printed_submit(stdout: str) -> list[str]:
    (line,) = [x for x in stdout.splitlines() if x.lstrip().startswith("dbos-agents submit")]
    argv = shlex.split(line)
    assert argv[:2] == ["dbos-agents", "submit"]
    return argv[2:]


@pytest.mark.parametrize(
    ("agent", "tool", "expects"),
    [
        ("asker", "confirm", '{"ok": boolean, "note"?: string}'),
        ("booker", "book", '{"when": string (date-time), "id": string (uuid), "seats": integer}'),
    ],
)
async def test_pending_shows_what_to_answer_and_its_command_is_accepted(
    runtime: AgentRuntime,
    client: AgentClient,
    integration_database_url: str,
    agent: str,
    tool: str,
    expects: str,
) -> None:
    url = integration_database_url
    h = await runtime.start(agent, "paste me")
    (p,) = await _pending(client, h.session_id)
    listed = await asyncio.to_thread(
        _cli, "pending", "--session", h.session_id, "--database-url", url
    )
    assert listed.returncode == 0, listed.stderr
    assert tool in listed.stdout and "paste me" in listed.stdout  # the tool and its arguments
    assert expects in " ".join(listed.stdout.split())  # it may wrap within its column
    assert "…" not in listed.stdout, listed.stdout  # nothing shrunk at 80 columns
    argv = _printed_submit(listed.stdout)
    assert argv[:2] == [h.session_id, p.tool_call_id] and argv[-2:] == ["--database-url", url]
    shown = await asyncio.to_thread(_cli, "show", h.session_id, "--database-url", url)
    assert shown.returncode == 0 and _printed_submit(shown.stdout) == argv, shown.stdout
    done = await asyncio.to_thread(_cli, "submit", *argv)
    assert done.returncode == 0, (argv, done.stdout, done.stderr)
    assert "accepted" in done.stdout
    assert (await h.result()).status == "completed"


async def test_an_approval_prints_approve_and_is_accepted(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    url = integration_database_url
    h = await runtime.start("closer", "close it")
    (p,) = await _pending(client, h.session_id)
    listed = await asyncio.to_thread(
        _cli, "pending", "--session", h.session_id, "--database-url", url
    )
    assert '"account_id": "acc-1"' in listed.stdout and "--deny" in listed.stdout
    argv = _printed_submit(listed.stdout)
    assert argv == [h.session_id, p.tool_call_id, "--approve", "--database-url", url]
    done = await asyncio.to_thread(_cli, "submit", *argv)
    assert done.returncode == 0, done.stderr
    assert "closer got" in ((await h.result()).output or "")


async def test_follow_prints_the_wait_and_its_command_answers_it(
    client: AgentClient, runtime: AgentRuntime, integration_database_url: str
) -> None:
    url = integration_database_url
    sid = await asyncio.to_thread(client.start, "asker", "follow and answer")
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "dbos_agents.cli", "follow", sid, "--database-url", url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
        env={**os.environ, "COLUMNS": "80"},
    )
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        while not any(x.lstrip().startswith("dbos-agents submit") for x in seen):
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            assert line, f"follow ended before the wait was shown: {seen}"
            seen.append(line.decode())
        text = "".join(seen)
        assert "client tool confirm" in text and "follow and answer" in text
        argv = _printed_submit(text)
        done = await asyncio.to_thread(_cli, "submit", *argv)
        assert done.returncode == 0, (argv, done.stdout, done.stderr)
        await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
