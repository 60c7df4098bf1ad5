"""In-process runtime for integration tests: one DBOS launch per test process.

DBOS is a process-wide singleton and ``DBOS.destroy()`` leaves workflow threads behind, so
the whole integration suite shares one launched runtime on one fresh database, and every
test isolates itself by session id.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from dbos_agents import AgentClient, AgentRuntime, AsyncAgentClient, Settings
from dbos_agents.testing import create_fresh_database, drop_database

from .agents import AGENTS, MODEL

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def integration_database_url(pg_server: str) -> Iterator[str]:
    name = f"dbos_agents_it_{os.getpid()}"
    url = create_fresh_database(pg_server, name)
    yield url
    drop_database(pg_server, name)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def runtime(integration_database_url: str) -> AsyncIterator[AgentRuntime]:
    settings = Settings(
        database_url=integration_database_url,
        executor_id=f"it-{os.getpid()}",
        queue_polling_interval_sec=0.05,
        model_backoff_initial_sec=0.01,
        wake_recheck_interval_sec=1.0,  # tests/integration/test_lost_wakeups.py
        park_after_sec=0.3,  # every client-tool test also parks and resumes its waits
    )
    rt = AgentRuntime(AGENTS, MODEL, settings=settings)
    await rt.launch()
    yield rt
    await rt.shutdown()


@pytest.fixture(scope="session")
def client(integration_database_url: str) -> Iterator[AgentClient]:
    c = AgentClient(integration_database_url)
    yield c
    c.close()


@pytest_asyncio.fixture(loop_scope="session")
async def aclient(integration_database_url: str) -> AsyncIterator[AsyncAgentClient]:
    async with await AsyncAgentClient.connect(integration_database_url) as c:
        yield c
