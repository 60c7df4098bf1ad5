"""Agents as MCP tools: a real worker subprocess (``tests.mcp_serve.app:runtime``), the HTTP
app with ``mcp`` on served by uvicorn on loopback, and the ``mcp`` SDK's client over
streamable HTTP. DBOS is never launched in the test process."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from fastapi import HTTPException, Request
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from dbos_agents import AgentClient
from dbos_agents.server import ServerSettings, create_app
from dbos_agents.server.auth import Operation, Principal
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.http.conftest import LiveServer

REPO = Path(__file__).resolve().parents[2]
SECRET = "mcp-serve-secret-" + "x" * 32
MODERN = "2026-07-28"


def settings(url: str, **overrides: Any) -> ServerSettings:
    base: dict[str, Any] = {
        "database_url": url,
        "secret": SECRET,
        "mcp": True,
        "mcp_agents": ["tests.mcp_serve.app:AGENTS"],
    }
    return ServerSettings(**{**base, **overrides})


def by_header(request: Request, operation: Operation, session_id: str | None) -> Principal:
    """The tests' hook: ``x-user: <user>@<tenant>`` signs the caller in; no header is 401."""
    who = request.headers.get("x-user")
    if not who:
        raise HTTPException(401, "sign in (x-user)")
    user, _, tenant = who.partition("@")
    return Principal(subject=who, user_id=user, tenant_id=tenant or None)


@asynccontextmanager
async def mcp_client(
    url: str, *, mode: str = MODERN, headers: dict[str, str] | None = None, **kwargs: Any
) -> AsyncIterator[Client]:
    """The SDK's ``Client`` on ``url`` over streamable HTTP (headers on every request)."""
    async with create_mcp_http_client(headers=headers) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode, **kwargs) as client:  # type: ignore[arg-type]
            yield client


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.mcp_serve.app:runtime",
        fresh_database_url,
        cwd=REPO,
        log_dir=tmp_path_factory.mktemp("mcp-serve-logs"),
        executor_id="mcp-serve-worker",
    ) as h:
        yield h


@pytest.fixture(scope="module")
def worker(harness: CrashHarness) -> Iterator[WorkerProcess]:
    w = harness.start_worker()
    w.wait_ready()
    yield w
    w.stop()


@pytest.fixture(scope="module")
def agent_client(harness: CrashHarness) -> AgentClient:
    return harness.client


@pytest.fixture(scope="module")
def open_server(fresh_database_url: str, worker: WorkerProcess) -> Iterator[str]:
    """No hook (``allow_unauthenticated``; tokens for a session's later calls); anonymous
    callers may approve (``tokens_may_approve``). Yields the MCP endpoint's URL."""
    s = settings(fresh_database_url, allow_unauthenticated=True, tokens_may_approve=True)
    server = LiveServer(create_app(s)).start()
    yield f"{server.url}/mcp"
    server.stop()


@pytest.fixture(scope="module")
def hook_server(fresh_database_url: str, worker: WorkerProcess) -> Iterator[str]:
    """The ``x-user`` hook; the tools are the agents the worker publishes."""
    s = settings(fresh_database_url, mcp_agents=None)
    server = LiveServer(create_app(s, authenticate=by_header)).start()
    yield f"{server.url}/mcp"
    server.stop()
