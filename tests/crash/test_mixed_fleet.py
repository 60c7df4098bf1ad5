"""Mixed fleets (issue 43): workers of different services share one database, and a worker
runs only sessions of agents it has. Real worker processes, real Postgres, real DBOS: a run
of another service's agent is never taken (per-agent queues), waits while its agent's
workers are down, goes back to its agent's queue when a crash recovery hands it to a
worker without the agent, and a rolling deploy that adds an agent fails nothing."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbos_agents import AgentClient, AgentUnavailableError, Settings, UnknownAgentError
from dbos_agents.testing import Witness, create_fresh_database, drop_database

from .waiting import until
from .workers import Worker

pytestmark = [pytest.mark.integration, pytest.mark.crash]
APP = "tests.crash.fleet_app"


STALE_AFTER = "10"
"""Above the tests' usual 3 s: on a loaded two-core host a live worker that misses 3 s of
heartbeats is adopted, and what it claimed after the adoption waits for its restart."""


SMALL_POOLS = {
    "DBOS_AGENTS_DB_POOL_SIZE": "4",
    "DBOS_AGENTS_DB_MAX_OVERFLOW": "4",
    "DBOS_AGENTS_SYSTEM_DB_POOL_SIZE": "8",
}
"""Up to four workers run at once here, beside the suite's other processes: each keeps to
a share of the server's ``max_connections`` (a worker's default bound is 75)."""


@pytest.fixture()
def fleet(pg_server: str, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Fleet]:
    """A database of its own per test: each test's fleet starts with no worker rows."""
    name = f"dbos_agents_t_fleet_{request.node.name[5:30]}_{os.getpid()}"[:63]
    f = Fleet(create_fresh_database(pg_server, name), tmp_path)
    try:
        yield f
    finally:
        f.close()
        drop_database(pg_server, name)


class Fleet:
    """Worker processes of named runtimes on one database, and a client on it."""

    def __init__(self, url: str, tmp: Path) -> None:
        self.url, self.tmp = url, tmp
        self.workers: list[Worker] = []
        self.client = AgentClient(url, settings=Settings(stale_after_sec=float(STALE_AFTER)))
        self.witness = Witness(tmp / "witness.jsonl")

    def start(self, runtime: str, executor_id: str) -> Worker:
        w = Worker(
            self.url,
            self.tmp / f"{executor_id}.log",
            executor_id,
            app=f"{APP}:{runtime}",
            env={"DBOS_AGENTS_STALE_AFTER_SEC": STALE_AFTER, **SMALL_POOLS},
        )
        self.workers.append(w)
        w.ready_id()
        return w

    def ran(self) -> dict[str, str]:
        """Session id -> executor id of every ``where`` call (each call at most once)."""
        events = self.witness.events("ran")
        sessions = Counter(e["session"] for e in events)
        assert max(sessions.values(), default=1) == 1, f"a tool ran twice: {sessions}"
        return {e["session"]: e["executor"] for e in events}

    def close(self) -> None:
        for w in self.workers:
            if w.popen.poll() is None:
                w.popen.kill()
                w.popen.wait(10)
        self.client.close()


def _start_many(client: AgentClient, agents: list[str]) -> list[str]:
    """Start one session per entry, from eight threads at once."""
    out: list[str | None] = [None] * len(agents)

    def start(i: int) -> None:
        out[i] = client.start(agents[i], f"{agents[i]} #{i}")

    threads = [threading.Thread(target=start, args=(i,)) for i in range(len(agents))]
    for batch in range(0, len(threads), 8):
        for t in threads[batch : batch + 8]:
            t.start()
        for t in threads[batch : batch + 8]:
            t.join()
    assert all(out)
    return [s for s in out if s is not None]


def test_two_services_each_run_only_their_own_agents_sessions(fleet: Fleet) -> None:
    fleet.start("shop_runtime", "shop-1")
    fleet.start("desk_runtime", "desk-1")
    agents = ["shop", "desk"] * 50
    sids = _start_many(fleet.client, agents)
    infos = [fleet.client.wait(sid, timeout=120) for sid in sids]
    assert Counter(i.status for i in infos) == {"completed": 100}, [
        (i.agent, i.status, i.error) for i in infos if i.status != "completed"
    ]
    ran = fleet.ran()
    where = Counter((agent, ran[sid]) for agent, sid in zip(agents, sids, strict=True))
    assert where == {("shop", "shop-1"): 50, ("desk", "desk-1"): 50}, where
    print(f"\nmixed fleet: 100 sessions, {dict(where)}, none failed")


def test_an_agent_whose_workers_are_down_queues_its_runs_until_one_returns(
    fleet: Fleet,
) -> None:
    shop = fleet.start("shop_runtime", "shop-1")
    desk = fleet.start("desk_runtime", "desk-1")
    assert desk.stop() == 0  # drained and marked stopped: desk has no live worker
    with pytest.raises(UnknownAgentError):
        fleet.client.start("nobody-ever-ran-this", "hi")  # still refused at once
    refusing = AgentClient(fleet.url, settings=Settings(start_when_no_worker="refuse"))
    try:
        with pytest.raises(AgentUnavailableError):
            refusing.start("desk", "refused by setting")
    finally:
        refusing.close()

    waiting = _start_many(fleet.client, ["desk"] * 5)
    served = _start_many(fleet.client, ["shop"] * 5)
    assert all(fleet.client.wait(s, timeout=60).status == "completed" for s in served)
    # The shop worker finished its own five and left desk's alone.
    assert {fleet.client.session(s).status for s in waiting} == {"queued"}
    queued = {q.agent: q for q in fleet.client.queued_runs()}
    assert queued["desk"].runs == 5 and queued["desk"].oldest_age_sec > 0
    assert not queued["desk"].served
    assert "shop" not in queued
    assert "does not run here" not in shop.log()  # never even claimed

    fleet.start("desk_runtime", "desk-2")
    infos = [fleet.client.wait(s, timeout=60) for s in waiting]
    assert {i.status for i in infos} == {"completed"}
    ran = fleet.ran()
    assert {ran[s] for s in waiting} == {"desk-2"}
    assert fleet.client.queued_runs() == []


def test_a_killed_workers_sessions_run_only_where_their_agents_run(fleet: Fleet) -> None:
    """The shop worker dies with sessions waiting inside its sub-agent's client tool and
    inside a durable tool's ``ctx.ask``. The desk worker adopts it: the roots go back to
    shop's queue, the child workflows to DBOS's internal queue, where the desk worker
    claims them and hands them back to their agents' queues. A second shop worker then
    finishes every one, each tool once."""
    shop = fleet.start("shop_runtime", "shop-1")
    desk = fleet.start("desk_runtime", "desk-1")
    c = fleet.client
    sids = [c.start("shop", f"ask #{i}") for i in range(2)] + [c.start("shop", "pack #3")]
    until(lambda: len(c.pending(kind="client")) == 3)
    shop.popen.send_signal(signal.SIGKILL)
    shop.popen.wait(10)
    until(lambda: "re-enqueued" in desk.log(), timeout=60)  # adopted by desk-1
    # The two clerks' and the durable tool's child workflows, back to their queues.
    until(lambda: desk.log().count("does not run here") >= 3, timeout=30)
    assert {c.session(s).status for s in sids} <= {"running", "waiting"}

    fleet.start("shop_runtime", "shop-2")
    for p in c.pending(kind="client"):
        c.submit_tool_result(p.root_session_id, p.tool_call_id, result={"answer": "yes"})
    infos = [c.wait(s, timeout=60) for s in sids]
    assert {i.status for i in infos} == {"completed"}, [(i.status, i.error) for i in infos]
    ran = Counter((e["agent"], e["executor"]) for e in fleet.witness.events("ran"))
    assert ran == {("clerk", "shop-2"): 2, ("pack:yes", "shop-2"): 1}, ran
    assert "failed" not in desk.log()


def test_a_rolling_deploy_that_adds_an_agent_fails_no_session(fleet: Fleet) -> None:
    """v1 runs ``orders``; v2 runs ``orders`` and ``returns``. The roll replaces v1's two
    workers one at a time while sessions of both agents keep starting."""
    v1 = [fleet.start("v1_runtime", "v1-a"), fleet.start("v1_runtime", "v1-b")]
    with pytest.raises(UnknownAgentError):
        fleet.client.start("returns", "before the deploy")
    started: list[tuple[str, str]] = []

    def wave(n: int) -> None:
        agents = ["orders", "returns"] * n
        started.extend(zip(agents, _start_many(fleet.client, agents), strict=True))

    fleet.start("v2_runtime", "v2-a")
    wave(10)  # v1-a, v1-b and v2-a running
    assert v1[0].stop() == 0
    wave(10)
    fleet.start("v2_runtime", "v2-b")
    wave(10)
    assert v1[1].stop() == 0
    wave(10)
    infos = {sid: fleet.client.wait(sid, timeout=120) for _, sid in started}
    assert Counter(i.status for i in infos.values()) == {"completed": len(started)}
    ran = fleet.ran()
    where = Counter((agent, ran[sid][:2]) for agent, sid in started)
    assert {w for a, w in where if a == "returns"} <= {"v2"}, where
    print(f"\nrolling deploy: {len(started)} sessions, {dict(where)}, none failed")
