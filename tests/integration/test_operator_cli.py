"""The operator surface as a user runs it: scripts/submit_tool_result.py and the CLI."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from dbos_agents import AgentClient, AgentRuntime
from dbos_agents.cli import app

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


# --- sessions: start, send, sessions, show, follow (in process, through typer's runner) ---

runner = CliRunner()


async def _invoke(url: str, *args: str) -> Result:
    """The CLI in this process, off the event loop (the runtime's sessions run on it)."""
    return await asyncio.to_thread(runner.invoke, app, [*args, "--database-url", url])


def _lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


async def test_start_follow_send_and_show(integration_database_url: str) -> None:
    url = integration_database_url
    started = await _invoke(url, "start", "chat", "hello", "--follow", "--json")
    assert started.exit_code == 0, started.output
    events = _lines(started.stdout)
    assert events[0]["event"] == "started" and events[0]["agent"] == "chat"
    sid = events[0]["session_id"]
    assert [e["role"] for e in events if e["event"] == "message"] == ["user", "assistant"]
    assert events[-1] == {**events[-1], "event": "status", "status": "completed", "run_seq": 1}

    again = await _invoke(url, "send", sid, "again", "--follow", "--json")
    assert again.exit_code == 0, again.output
    messages = [e for e in _lines(again.stdout) if e["event"] == "message"]
    assert [m["role"] for m in messages] == ["user", "assistant"]  # only the new run's
    assert messages[0]["content"] == "again" and messages[1]["content"].endswith(": again")

    shown = await _invoke(url, "show", sid, "--json")
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)
    assert doc["session"]["id"] == sid and doc["session"]["run_seq"] == 2
    assert [m["seq"] for m in doc["messages"]] == [1, 2, 3, 4]
    human = await _invoke(url, "show", sid)
    assert "-- run 2 --" in human.stdout and messages[1]["content"] in human.stdout


async def test_sessions_lists_newest_first_with_filters(integration_database_url: str) -> None:
    url = integration_database_url
    tenant = f"t-list-{uuid.uuid4().hex[:8]}"
    ids = []
    for agent in ("chat", "chat", "asker"):
        r = await _invoke(url, "start", agent, "hi", "--tenant", tenant, "--json")
        assert r.exit_code == 0, r.output
        ids.append(json.loads(r.stdout)["session_id"])
    listed = await _invoke(url, "sessions", "--tenant", tenant, "--json")
    assert [s["id"] for s in json.loads(listed.stdout)] == ids[::-1]
    newest = await _invoke(url, "sessions", "--tenant", tenant, "--limit", "1", "--json")
    assert [s["id"] for s in json.loads(newest.stdout)] == [ids[2]]
    chats = await _invoke(url, "sessions", "--tenant", tenant, "--agent", "chat", "--json")
    assert {s["id"] for s in json.loads(chats.stdout)} == set(ids[:2])
    for sid in ids[:2]:
        assert (await _invoke(url, "follow", sid)).exit_code == 0
    done = await _invoke(url, "sessions", "--tenant", tenant, "--status", "completed", "--json")
    assert {s["id"] for s in json.loads(done.stdout)} == set(ids[:2])
    human = await _invoke(url, "sessions", "--tenant", tenant)
    assert all(sid in human.stdout for sid in ids) and "newest first" in human.stdout
    bad = await _invoke(url, "sessions", "--status", "sleeping", "--json")
    assert bad.exit_code == 2 and json.loads(bad.stdout)["error"] == "INVALID_USAGE"


async def test_follow_announces_waits_and_ends_with_the_run(
    client: AgentClient, integration_database_url: str
) -> None:
    """A real `dbos-agents follow` process: it reports the client-tool wait with the
    command that answers it, keeps following, and exits 0 once the answered run completes."""
    url = integration_database_url
    sid = await asyncio.to_thread(client.start, "asker", "follow me")
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "dbos_agents.cli", "follow", sid, "--json", "--database-url", url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        seen: list[dict[str, Any]] = []
        while not any(e["event"] == "pending" for e in seen):
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            assert line, "follow ended before the wait was announced"
            seen.append(json.loads(line))
        (wait,) = [e for e in seen if e["event"] == "pending"]
        assert wait["tool"] == "confirm" and wait["root_session_id"] == sid
        outcome = await asyncio.to_thread(
            client.submit_tool_result, sid, wait["tool_call_id"], result={"ok": True}
        )
        assert outcome.status == "accepted"
        rest, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    final = _lines(rest.decode())[-1]
    assert final["event"] == "status" and final["status"] == "completed"


async def test_follow_announces_a_sub_agents_wait_once(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    """Following the root session: the wait of a sub-agent two levels down (its call is in
    another session's messages) is announced once, and follow ends with the run."""
    url = integration_database_url
    sid = await asyncio.to_thread(client.start, "boss", "deep")
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "dbos_agents.cli", "follow", sid, "--json", "--database-url", url),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        cwd=REPO,
    )
    try:
        assert proc.stdout is not None
        seen: list[dict[str, Any]] = []
        while not any(e["event"] == "pending" for e in seen):
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=60)
            assert line, "follow ended before the sub-agent's wait was announced"
            seen.append(json.loads(line))
        (wait,) = [e for e in seen if e["event"] == "pending"]
        assert wait["tool"] == "confirm" and wait["root_session_id"] == sid
        await asyncio.sleep(2.5)  # two more looks at the tree: not announced again
        outcome = await asyncio.to_thread(
            client.submit_tool_result, sid, wait["tool_call_id"], result={"ok": True}
        )
        assert outcome.status == "accepted"
        rest, _ = await asyncio.wait_for(proc.communicate(), timeout=60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0
    lines = _lines(rest.decode())
    assert not [e for e in lines if e["event"] == "pending"]
    assert lines[-1]["event"] == "status" and lines[-1]["status"] == "completed"


async def test_one_line_errors_and_their_exit_codes(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str
) -> None:
    url = integration_database_url
    missing = await _invoke(url, "show", "ses_nope")
    assert missing.exit_code == 8
    assert missing.stderr.strip().splitlines() == [
        "error [SESSION_NOT_FOUND] no session 'ses_nope'"
    ]
    as_json = await _invoke(url, "follow", "ses_nope", "--json")
    assert as_json.exit_code == 8
    assert json.loads(as_json.stdout) == {
        "error": "SESSION_NOT_FOUND",
        "message": "no session 'ses_nope'",
        "exit_code": 8,
    }
    invalid = await _invoke(url, "start", "", "hi")
    assert invalid.exit_code == 7 and "[INVALID_REQUEST]" in invalid.stderr
    unknown = await _invoke(
        url, "start", "nobody", "hi", "--app", "dbos_agents.examples.support_desk:runtime"
    )
    assert unknown.exit_code == 10 and "this app has: support" in unknown.stderr

    h = await runtime.start("closer", "busy")
    await _pending(client, h.session_id)
    busy = await _invoke(url, "send", h.session_id, "more", "--json")
    assert busy.exit_code == 11 and json.loads(busy.stdout)["error"] == "SESSION_BUSY"
    assert (await _invoke(url, "interrupt", h.session_id)).exit_code == 0
    ended = await _invoke(url, "follow", h.session_id)
    assert ended.exit_code == 13 and "interrupted" in ended.stdout
