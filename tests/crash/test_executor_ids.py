"""Executor ids on one host (issue 29, item 5): workers started with no executor id take a
slot each (``worker-<host>``, ``worker-<host>:1``, ...), a restarted worker gets its old slot
back and recovers its session, and an explicitly duplicated id is refused with a message
that names the cause while the first worker runs on."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbos_agents import AgentClient
from dbos_agents.store.workers import list_workers

from .waiting import until
from .workers import Worker

pytestmark = [pytest.mark.integration, pytest.mark.crash]
HOST = socket.gethostname()


@pytest.fixture
def workers(tmp_path: Path) -> Iterator[list[Worker]]:
    made: list[Worker] = []
    yield made
    for w in made:
        w.stop()


def test_two_default_workers_on_one_host_take_a_slot_each_and_a_restart_takes_its_own_back(
    fresh_database_url: str, tmp_path: Path, workers: list[Worker]
) -> None:
    url = fresh_database_url
    a = Worker(url, tmp_path / "a.log")
    workers.append(a)
    assert a.ready_id() == f"worker-{HOST}"
    b = Worker(url, tmp_path / "b.log")
    workers.append(b)
    assert b.ready_id() == f"worker-{HOST}:1"
    client = AgentClient(url)
    try:
        sid = client.start("fleet", "order-slot")
        until(lambda: bool(client.pending(session_id=sid)), 30)
        time.sleep(2.0)  # several heartbeats: neither knocks the other out
        assert a.popen.poll() is None, a.log()
        assert b.popen.poll() is None, b.log()
        rows = {w.executor_id: w.status for w in list_workers(client.engine)}
        assert rows == {f"worker-{HOST}": "running", f"worker-{HOST}:1": "running"}
        # The session runs on one of them: kill that one, start a third worker.
        (p,) = client.pending(session_id=sid)
        wf_owner = _workflow_executor(client, sid)
        victim = a if wf_owner == f"worker-{HOST}" else b
        assert wf_owner in rows
        victim.popen.kill()
        victim.popen.wait(10)
        again = Worker(url, tmp_path / "again.log")
        workers.append(again)
        assert again.ready_id() == wf_owner  # its old slot, so DBOS recovers its session
        assert client.submit_tool_result(sid, p.tool_call_id, result={"answer": "ok"}).status == (
            "accepted"
        )
        assert client.wait(sid, timeout=60).final_output == "fleet done"
    finally:
        client.close()


def test_an_explicit_duplicate_executor_id_is_refused_and_the_first_worker_runs_on(
    fresh_database_url: str, tmp_path: Path, workers: list[Worker]
) -> None:
    first = Worker(fresh_database_url, tmp_path / "first.log", executor_id="twin-id")
    workers.append(first)
    assert first.ready_id() == "twin-id"
    second = Worker(fresh_database_url, tmp_path / "second.log", executor_id="twin-id")
    workers.append(second)
    assert second.popen.wait(60) == 2, second.log()
    log = second.log()
    assert "twin-id" in log and "in use by another live worker" in log, log
    assert f"pid {first.popen.pid}" in log, log
    assert "Traceback" not in log, log
    time.sleep(1.5)  # several heartbeats
    assert first.popen.poll() is None, first.log()
    assert "was adopted" not in first.log() and "taken over" not in first.log()


def _workflow_executor(client: AgentClient, session_id: str) -> str:
    import sqlalchemy as sa

    with client.engine.connect() as conn:
        return str(
            conn.execute(
                sa.text("SELECT executor_id FROM dbos.workflow_status WHERE workflow_uuid = :w"),
                {"w": session_id},
            ).scalar_one()
        )
