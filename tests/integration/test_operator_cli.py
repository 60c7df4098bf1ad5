"""The operator surface as a user runs it: scripts/submit_tool_result.py and the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dbos_agents import AgentClient, AgentRuntime

from .test_client_tools import _pending

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
REPO = Path(__file__).resolve().parents[2]


def _run(url: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "scripts/submit_tool_result.py", *args, "--database-url", url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        input=stdin,
    )


def _cli(url: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", *args, "--database-url", url],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


async def test_admin_script_exit_codes(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    url = integration_database_url
    h = await runtime.start("asker", "script")
    (p,) = await _pending(client, h.session_id)
    sid, cid = h.session_id, p.tool_call_id

    bad = await asyncio.to_thread(_run, url, sid, cid, "--result", '{"ok": "nope"}', "--json")
    assert bad.returncode == 6, bad.stderr
    assert json.loads(bad.stdout)["error"] == "INVALID_RESULT"
    mismatch = await asyncio.to_thread(_run, url, sid, cid, "--approve")
    assert mismatch.returncode == 7 and "INVALID_REQUEST" in mismatch.stderr
    malformed = await asyncio.to_thread(_run, url, sid, cid, "--result", "{not json")
    assert malformed.returncode == 2
    ok = await asyncio.to_thread(
        _run, url, sid, cid, "--result-file", "-", "--json", stdin='{"ok": true, "note": "stdin"}'
    )
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["status"] == "accepted"
    dup = await asyncio.to_thread(_run, url, sid, cid, "--result", '{"ok": true}')
    assert dup.returncode == 3 and "already_completed" in dup.stdout
    unknown = await asyncio.to_thread(_run, url, sid, "call_nope", "--error", "x")
    assert unknown.returncode == 4
    assert "stdin" in ((await h.result()).output or "")

    slow = await runtime.start("impatient", "late")
    await slow.result()
    (tomb,) = await asyncio.to_thread(
        client.pending, session_id=slow.session_id, include_resolved=True
    )
    late = await asyncio.to_thread(
        _run, url, slow.session_id, tomb.tool_call_id, "--result", '{"ok": true}'
    )
    assert late.returncode == 5


async def test_cli_pending_fail_and_interrupt(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str, tmp_path: Path
) -> None:
    url = integration_database_url
    a = await runtime.start("asker", "fail me", tenant_id="tenant-cli")
    b = await runtime.start("closer", "interrupt me", tenant_id="tenant-cli")
    (pa,) = await _pending(client, a.session_id)
    (pb,) = await _pending(client, b.session_id)
    listed = await asyncio.to_thread(_cli, url, "pending", "--tenant", "tenant-cli", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {r["tool_call_id"] for r in json.loads(listed.stdout)} == {
        pa.tool_call_id,
        pb.tool_call_id,
    }
    human = await asyncio.to_thread(_cli, url, "pending", "--tenant", "tenant-cli")
    assert "2 pending call(s)" in human.stdout
    failed = await asyncio.to_thread(
        _cli, url, "fail", a.session_id, pa.tool_call_id, "--error", "operator: stuck"
    )
    assert failed.returncode == 0, failed.stderr
    assert "operator: stuck" in ((await a.result()).output or "")
    stopped = await asyncio.to_thread(_cli, url, "interrupt", b.session_id, "--json")
    assert stopped.returncode == 0, stopped.stderr
    assert json.loads(stopped.stdout)["cancelled_calls"] == [pb.tool_call_id]
    assert (await asyncio.to_thread(client.session, b.session_id)).status == "interrupted"


async def test_cli_approvals_record_who_decided(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    url = integration_database_url
    for by, flag in ((["--by", "ops-ann"], "--approve"), ([], "--deny")):
        h = await runtime.start("closer", "close it")
        (p,) = await _pending(client, h.session_id)
        done = await asyncio.to_thread(
            _run, url, h.session_id, p.tool_call_id, flag, "--reason", "checked", *by
        )
        assert done.returncode == 0, done.stderr
        await h.result()
        (row,) = await asyncio.to_thread(
            client.pending, session_id=h.session_id, include_resolved=True
        )
        assert isinstance(row.submission, dict) and row.submission["reason"] == "checked"
        decided = str(row.submission["decided_by"])
        assert decided == "ops-ann" if by else decided.startswith("cli:")
