"""The inbox's timeline of a session, in Chromium: a worker subprocess runs ``tracer``
(a server tool, a client tool, an approval, a sub-agent, a durable tool), its waits are
answered after a pause, and the page shows every run, turn, call and wait with its times
and the run's usage. Saves docs/images/traces-timeline.png."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from dbos_agents import AgentClient
from dbos_agents.server import ServerSettings, create_app
from dbos_agents.testing import CrashHarness
from tests.browser.conftest import CHROMIUM, OPERATOR_TOKEN, sign_in, wait_pending
from tests.http.conftest import LiveServer

REPO = Path(__file__).resolve().parents[2]
SHOT = REPO / "docs" / "images" / "traces-timeline.png"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: .ci/setup-browser"),
]


@pytest.fixture(scope="module")
def session(fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with CrashHarness(
        "tests.traces.app:runtime",
        fresh_database_url,
        cwd=REPO,
        log_dir=tmp_path_factory.mktemp("timeline-logs"),
        executor_id="timeline-worker",
    ) as h:
        worker = h.start_worker()
        try:
            client = h.client
            sid = client.start("tracer", "go")
            confirm = wait_pending(client, sid, tool="confirm", timeout=60)
            time.sleep(0.6)  # a human takes a moment
            client.submit_tool_result(sid, confirm.tool_call_id, result={"ok": True})
            wire = wait_pending(client, sid, tool="wire", timeout=60)
            time.sleep(0.4)
            client.submit_approval(sid, wire.tool_call_id, True, decided_by="op")
            assert client.wait(sid, timeout=60).status == "completed"
        finally:
            worker.stop()
        yield sid


def test_the_timeline_shows_where_time_and_money_went(
    fresh_database_url: str, session: str
) -> None:
    client = AgentClient(fresh_database_url)
    settings = ServerSettings(
        database_url=fresh_database_url,
        allow_unauthenticated=True,
        inbox=True,
        operator_token=OPERATOR_TOKEN,
    )
    live = LiveServer(create_app(settings, client=client)).start()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
            page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
            sign_in(page, live.url)
            page.wait_for_url(f"{live.url}/inbox")
            page.goto(f"{live.url}/inbox/sessions/{session}/timeline")
            table = page.get_by_test_id("timeline")
            kinds = table.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.kind)")
            names = table.locator("tbody tr td:nth-child(2)").all_inner_texts()
            assert kinds.count("run") == 2  # the session's run and its sub-agent's
            assert kinds.count("turn") == 3  # tracer's two model calls, helper's one
            assert kinds.count("tool") == 5
            assert kinds.count("wait") == 2
            assert {"lookup", "confirm", "wire", "subagent__helper", "crawl"} <= set(names)
            waits = table.locator("tbody tr[data-kind=wait] [data-testid=took]").all_inner_texts()
            assert all(float(w.split()[0]) >= 0.3 for w in waits), waits  # the human's pause
            tokens = page.get_by_test_id("timeline-tokens").inner_text()
            assert tokens.split()[0] != "0"
            SHOT.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOT), full_page=True)
            browser.close()
    finally:
        live.stop()
        client.close()
