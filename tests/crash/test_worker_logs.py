"""What a worker says (issue 29, item 7): one INFO line when a session's run starts, waits
and ends; a routine interrupt is one INFO line, not an ERROR with DBOS's traceback; JSON
lines with ``--log-format json``; and the CLI prints no bare event names."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbos_agents import AgentClient

from .waiting import until
from .workers import REPO, Worker

pytestmark = [pytest.mark.integration, pytest.mark.crash]


@pytest.fixture(scope="module")
def client(fresh_database_url: str) -> Iterator[AgentClient]:
    c = AgentClient(fresh_database_url)
    yield c
    c.close()


def _waiting(client: AgentClient, message: str) -> tuple[str, str]:
    sid = client.start("fleet", message)
    until(lambda: bool(client.pending(session_id=sid)), 30)
    (p,) = client.pending(session_id=sid)
    return sid, p.tool_call_id


def _lines_with(text: str, *words: str) -> list[str]:
    return [ln for ln in text.splitlines() if all(w in ln for w in words)]


def test_a_session_is_one_line_at_each_step_and_an_interrupt_no_traceback(
    client: AgentClient, fresh_database_url: str, tmp_path: Path
) -> None:
    w = Worker(fresh_database_url, tmp_path / "w.log", "logs-text", split=True)
    try:
        w.ready_id()
        done, call = _waiting(client, "order-done")
        assert client.submit_tool_result(done, call, result={"answer": "ok"}).status == "accepted"
        assert client.wait(done, timeout=60).status == "completed"
        stopped, _ = _waiting(client, "order-stopped")
        out = _cli("interrupt", stopped, url=fresh_database_url)
        assert out.returncode == 0, out.stderr
        assert "client_tool" not in out.stderr, out.stderr  # no bare event names
        until(lambda: _lines_with(w.stderr(), stopped, "interrupted"), 20)
    finally:
        assert w.stop() == 0
    err = w.stderr()
    assert "Traceback" not in err and " ERROR " not in err, err
    assert len(_lines_with(err, done, "INFO", "run 1 started")) == 1, err
    assert len(_lines_with(err, done, "INFO", "waits for ask_long")) == 1, err
    assert len(_lines_with(err, done, "INFO", "run 1 completed")) == 1, err
    assert len(_lines_with(err, stopped, "INFO", "interrupted")) == 1, err
    assert not _lines_with(err, "no longer owned"), err
    assert len(err.splitlines()) <= 12, err  # launch, 2 x 3 session lines, interrupt, drain


def test_json_lines_with_log_format_json(
    client: AgentClient, fresh_database_url: str, tmp_path: Path
) -> None:
    w = Worker(
        fresh_database_url,
        tmp_path / "j.log",
        "logs-json",
        args=["--log-format", "json"],
        split=True,
    )
    try:
        w.ready_id()
        sid, call = _waiting(client, "order-json")
        assert client.submit_tool_result(sid, call, result={"answer": "ok"}).status == "accepted"
        assert client.wait(sid, timeout=60).status == "completed"
    finally:
        assert w.stop() == 0
    docs = [json.loads(line) for line in w.stderr().splitlines()]
    assert docs and all({"time", "level", "logger", "message"} <= d.keys() for d in docs), docs
    mine = [d for d in docs if d.get("session_id") == sid]
    assert [d["event"] for d in mine] == ["run_started", "client_tool.suspended", "run_ended"]
    assert mine[-1]["status"] == "completed" and mine[-1]["level"] == "INFO"


def _cli(*args: str, url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DBOS_AGENTS_DATABASE_URL": url}
    return subprocess.run(
        [sys.executable, "-m", "dbos_agents.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        timeout=60,
    )
