"""A session whose workflow an operator cancelled with DBOS's own CLI (issue 29, item 6):
``dbos workflow list/cancel --sys-db-url`` work against our database, the session then reads
``interrupted`` (not ``running`` forever), and a new message continues it (no SESSION_BUSY);
a persistent session whose inbox workflow was cancelled gets its message in a new workflow."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from dbos_agents import AgentClient, AgentRuntime

from .polling import until

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
DBOS_CLI = str(Path(sys.executable).with_name("dbos"))


def _dbos(*args: str, url: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """DBOS's CLI as the docs show it, from a folder with no dbos-config.yaml."""
    return subprocess.run(
        [DBOS_CLI, "workflow", *args, "--sys-db-url", url],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


async def test_a_session_cancelled_with_the_dbos_cli_reads_interrupted_and_takes_a_message(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str, tmp_path: Path
) -> None:
    h = await runtime.start("asker", "cancel me from outside")
    sid = h.session_id
    await until(lambda: client.pending(session_id=sid), "the wait never opened")
    listed = _dbos("list", "--limit", "1000", url=integration_database_url, cwd=tmp_path)
    assert listed.returncode == 0 and sid in listed.stdout, listed.stderr
    cancelled = _dbos("cancel", sid, url=integration_database_url, cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr

    info = await asyncio.to_thread(client.session, sid)
    assert info.status == "interrupted"
    running = await asyncio.to_thread(client.sessions, status="running", limit=1000)
    assert sid not in [s.id for s in running]
    listed_all = await asyncio.to_thread(client.sessions, limit=1000)
    assert [s.status for s in listed_all if s.id == sid] == ["interrupted"]

    await asyncio.to_thread(client.send, sid, "and now?")  # no SessionBusyError
    info = await asyncio.to_thread(client.wait, sid, timeout=30)
    assert (info.status, info.run_seq) == ("completed", 2)
    (old,) = await asyncio.to_thread(client.pending, session_id=sid, include_resolved=True)
    assert old.status == "cancelled"  # run 1's wait, closed as an interrupt closes it


async def test_a_persistent_session_whose_inbox_workflow_was_cancelled_takes_a_message(
    runtime: AgentRuntime, client: AgentClient, integration_database_url: str, tmp_path: Path
) -> None:
    h = await runtime.start("pchat", "one")
    assert (await h.result()).status == "completed"
    cancelled = _dbos("cancel", h.session_id, url=integration_database_url, cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    await asyncio.to_thread(client.send, h.session_id, "two")
    info = await asyncio.to_thread(client.wait, h.session_id, timeout=30)
    assert (info.status, info.final_output, info.run_seq) == ("completed", "echo 1: two", 2)
    assert info.workflow_id != h.session_id  # a new workflow: the cancelled one reads nothing
