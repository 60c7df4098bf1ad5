"""The embedded default database, as a newcomer meets it: the first command that needs a
database creates and migrates it (one line says so, and how to stop it), ``AgentClient()``
with no URL finds the same one as the CLI, and ``dbos-agents db url|start|stop|status``
manage it. One data directory for the module; its Postgres is stopped at the end."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from dbos_agents.client import AgentClient, AsyncAgentClient
from dbos_agents.store.embedded import stop_embedded_database

pytestmark = pytest.mark.integration
BIN = Path(sys.executable).parent / "dbos-agents"
UNSET = ("DBOS_AGENTS_DATABASE_URL", "DBOS_AGENTS_SERVER_DATABASE_URL", "DBOS_AGENTS_CONFIG")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """An empty project folder; the embedded Postgres goes to its ``.dbos_agents/``."""
    path = tmp_path_factory.mktemp("project")
    yield path
    stop_embedded_database(path / ".dbos_agents" / "pgdata")


def _cli(folder: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in UNSET and k != "DBOS_AGENTS_DATA_DIR"}
    return subprocess.run(
        [str(BIN), *args], capture_output=True, text=True, cwd=folder, env=env, timeout=timeout
    )


def test_status_and_stop_before_any_database_create_nothing(folder: Path) -> None:
    status = _cli(folder, "db", "status")
    assert status.returncode == 0, status.stderr
    assert "not created" in status.stdout and ".dbos_agents/pgdata" in status.stdout
    stop = _cli(folder, "db", "stop")
    assert stop.returncode == 0 and "not running" in stop.stdout
    assert json.loads(_cli(folder, "db", "status", "--json").stdout)["state"] == "missing"
    assert not (folder / ".dbos_agents").exists()


def test_the_first_command_creates_and_migrates_the_database_and_says_so(folder: Path) -> None:
    r = _cli(folder, "sessions")
    assert r.returncode == 0, r.stderr
    line = r.stderr.splitlines()[0]
    assert line.startswith("created the embedded Postgres in .dbos_agents/pgdata/ (first use)")
    assert "`dbos-agents db stop` stops it" in line  # it outlives the command: say so
    assert "no sessions match" in r.stdout + r.stderr  # migrated: the tables are there
    again = _cli(folder, "sessions")
    assert again.returncode == 0
    line = again.stderr.splitlines()[0]
    assert line.startswith("database: the embedded Postgres in .dbos_agents/pgdata/ on 127.0.0.1:")


def test_db_status_stop_start_and_url(folder: Path) -> None:
    _cli(folder, "db", "start")
    status = json.loads(_cli(folder, "db", "status", "--json").stdout)
    assert status["state"] == "running" and status["port"] > 0 and status["pid"] > 0
    text = _cli(folder, "db", "status").stdout
    assert f"127.0.0.1:{status['port']}" in text and "dbos-agents db stop" in text

    stop = _cli(folder, "db", "stop")
    assert stop.returncode == 0 and "stopped the embedded Postgres" in stop.stdout
    assert json.loads(_cli(folder, "db", "status", "--json").stdout)["state"] == "stopped"

    url = _cli(folder, "db", "url")
    assert url.returncode == 0, url.stderr
    assert url.stdout.strip() == f"postgresql://postgres@127.0.0.1:{status['port']}/dbos_agents"
    assert "started the embedded Postgres" in url.stderr and "dbos-agents db stop" in url.stderr

    start = _cli(folder, "db", "start")
    assert start.returncode == 0 and "already running" in start.stdout


def test_db_url_prints_a_configured_url_as_is(folder: Path) -> None:
    env = {**os.environ, "DBOS_AGENTS_DATABASE_URL": "postgresql://app@db.example:5432/agents"}
    r = subprocess.run(
        [str(BIN), "db", "url"], capture_output=True, text=True, cwd=folder, env=env, timeout=60
    )
    assert r.returncode == 0 and r.stdout.strip() == "postgresql://app@db.example:5432/agents"


def test_clients_without_a_url_use_the_database_of_the_cli(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _cli(folder, "db", "url").stdout.strip()
    for name in (*UNSET, "DBOS_AGENTS_DATA_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(folder)
    client = AgentClient()
    try:
        assert client.database_url == url
        assert client.sessions() == []
    finally:
        client.close()

    async def connect() -> str:
        aclient = await AsyncAgentClient.connect()
        try:
            return aclient.database_url
        finally:
            await aclient.aclose()

    assert asyncio.run(connect()) == url


def test_a_client_starts_a_stopped_database_itself(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert _cli(folder, "db", "stop").returncode == 0
    for name in UNSET:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DBOS_AGENTS_DATA_DIR", str(folder / ".dbos_agents"))
    client = AgentClient()
    try:
        client.ping()
    finally:
        client.close()
    assert json.loads(_cli(folder, "db", "status", "--json").stdout)["state"] == "running"


RUNTIME_SCRIPT = """
import asyncio
from dbos_agents import Agent, AgentRuntime
from dbos_agents.models import ScriptedModel

async def main():
    rt = AgentRuntime([Agent("hello")], ScriptedModel(["hi there"]))
    await rt.launch()
    handle = await rt.start("hello", "hi")
    print((await handle.result()).output)
    await rt.shutdown()

asyncio.run(main())
"""


def test_an_in_process_runtime_with_no_url_uses_the_same_database(folder: Path) -> None:
    """``AgentRuntime(...).launch()`` with no URL: the embedded database the CLI uses."""
    env = {k: v for k, v in os.environ.items() if k not in UNSET and k != "DBOS_AGENTS_DATA_DIR"}
    r = subprocess.run(
        [sys.executable, "-c", RUNTIME_SCRIPT],
        capture_output=True,
        text=True,
        cwd=folder,
        env=env,
        timeout=180,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip().splitlines()[-1] == "hi there"
    listed = _cli(folder, "sessions", "--agent", "hello", "--json")
    assert listed.returncode == 0, listed.stderr
    assert [s["agent"] for s in json.loads(listed.stdout)] == ["hello"]
