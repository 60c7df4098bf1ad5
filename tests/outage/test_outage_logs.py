"""An outage is two lines of the worker's stderr (issue 29, item 7): one when it starts,
one when it ends; before, DBOS's retries printed over a thousand lines in six seconds."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from dbos_agents import AgentClient
from dbos_agents.testing import PrivateCluster, create_fresh_database

from ..crash.waiting import until
from ..crash.workers import Worker

pytestmark = [pytest.mark.integration, pytest.mark.crash]
DOWN_SEC = 6.0
_names = itertools.count()


def test_an_outage_is_one_line_when_it_starts_and_one_when_it_ends(
    cluster: PrivateCluster, tmp_path: Path
) -> None:
    if not cluster.is_running():
        cluster.start()
    url = create_fresh_database(cluster.url, f"outage_logs_{next(_names)}")
    env = {"DBOS_AGENTS_CONNECT_TIMEOUT_SEC": "2", "DBOS_AGENTS_STALE_AFTER_SEC": "10"}
    w = Worker(url, tmp_path / "w.log", "outage-logs", split=True, env=env)
    client = AgentClient(url)
    try:
        w.ready_id()
        sids = [client.start("fleet", f"order-{i}") for i in range(2)]
        until(lambda: len(client.pending(kind="client")) == 2, 30)
        before = len(w.stderr().splitlines())
        cluster.stop("fast")
        time.sleep(DOWN_SEC)
        during = w.stderr().splitlines()[before:]
        cluster.start()
        until(lambda: "database answers again" in w.stderr(), 30)
        for p in client.pending(kind="client"):
            client.submit_tool_result(p.root_session_id, p.tool_call_id, result={"answer": "ok"})
        for sid in sids:
            assert client.wait(sid, timeout=60).status == "completed"
    finally:
        client.close()
        w.stop()
    after = w.stderr().splitlines()[before + len(during) :]
    print(f"\nstderr lines while Postgres was down {DOWN_SEC:.0f}s: {len(during)}")
    assert len(during) <= 2, "\n".join(during)
    outage = [ln for ln in during + after if "database" in ln and "WARNING" in ln]
    assert len(outage) == 2, "\n".join(during + after)
    assert "database unreachable" in outage[0] and "database answers again" in outage[1]
    assert "Traceback" not in w.stderr(), w.stderr()
