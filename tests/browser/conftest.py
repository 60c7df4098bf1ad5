"""A real worker subprocess, a real uvicorn serving the inbox, and Debian's Chromium.

Chromium is driven by playwright (``executable_path=/usr/bin/chromium``: no ``playwright
install``); every test here is skipped when it is absent (``.ci/setup-browser`` installs
it). The operator signs in with the operator token and sees tenant ``acme`` only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from dbos_agents import AgentClient, PendingCall
from dbos_agents.server import ServerSettings, create_app
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.http.conftest import LiveServer

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
OPERATOR_TOKEN = "operator-token-" + "y" * 32
TENANT = "acme"
OTHER_TENANT = "globex"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test here ``browser``; skip them all when Chromium is absent."""
    here = Path(__file__).parent
    for item in items:
        if here in item.path.parents:
            item.add_marker(pytest.mark.browser)
            if not CHROMIUM.exists():
                item.add_marker(
                    pytest.mark.skip(reason="no /usr/bin/chromium: run .ci/setup-browser")
                )


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.browser.app:runtime",
        fresh_database_url,
        cwd=REPO,
        log_dir=tmp_path_factory.mktemp("browser-logs"),
        executor_id="browser-tests-worker",
    ) as h:
        yield h


@pytest.fixture(scope="module")
def worker(harness: CrashHarness) -> Iterator[WorkerProcess]:
    w = harness.start_worker()
    yield w
    w.stop()


@pytest.fixture(scope="module")
def client(harness: CrashHarness) -> AgentClient:
    return harness.client


class StatementCounter:
    """Counts the SQL statements the server's engine runs (to prove one query per list)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.count = 0
        sa.event.listen(engine, "before_cursor_execute", self._seen)

    def _seen(self, *args: object) -> None:
        self.count += 1


@pytest.fixture(scope="module")
def server_client(fresh_database_url: str) -> Iterator[AgentClient]:
    c = AgentClient(fresh_database_url)
    yield c
    c.close()


@pytest.fixture(scope="module")
def statements(server_client: AgentClient) -> StatementCounter:
    return StatementCounter(server_client.engine)


@pytest.fixture(scope="module")
def server(
    server_client: AgentClient, worker: WorkerProcess, statements: StatementCounter
) -> Iterator[LiveServer]:
    settings = ServerSettings(
        database_url=server_client.database_url,
        allow_unauthenticated=True,
        inbox=True,
        operator_token=OPERATOR_TOKEN,
        operator_tenant=TENANT,
    )
    live = LiveServer(create_app(settings, client=server_client)).start()
    yield live
    live.stop()


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    b = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
    yield b
    b.close()


def sign_in(page: Page, base: str, name: str = "alice", token: str = OPERATOR_TOKEN) -> None:
    page.goto(f"{base}/inbox/sign-in")
    page.fill("input[name=name]", name)
    page.fill("input[name=token]", token)
    page.click("button:has-text('Sign in')")


@pytest.fixture()
def page(browser: Browser, server: LiveServer) -> Iterator[Page]:
    """A fresh browser context, signed in as ``operator:alice``."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    p = context.new_page()
    sign_in(p, server.url)
    p.wait_for_url(f"{server.url}/inbox")
    yield p
    context.close()


def wait_pending(
    client: AgentClient, sid: str, *, tool: str | None = None, timeout: float = 30.0
) -> PendingCall:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rows = [r for r in client.pending(session_id=sid) if tool in (None, r.tool)]
        if rows:
            return rows[0]
        time.sleep(0.05)
    raise TimeoutError(f"no pending call for {sid}")


def call_row(client: AgentClient, sid: str, tool_call_id: str) -> PendingCall:
    rows = client.pending(session_id=sid, include_resolved=True)
    return next(r for r in rows if r.tool_call_id == tool_call_id)
