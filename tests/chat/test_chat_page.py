"""The example chat page (``/chat/{agent}``) in Debian's Chromium, driven by playwright:
a client tool runs in the browser, an approval button works, a durable tool's notes and
asks show, tokens appear before the turn ends, and a worker SIGKILLed mid-answer leaves the page with exactly the stored reply (last:
it replaces the module's worker).

``DBOS_AGENTS_CHAT_SCREENSHOT=docs/chat-page.png`` also saves a screenshot mid-answer.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from dbos_agents import AgentClient
from dbos_agents.server.chats import session_of_chat
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.http.conftest import SECRET, LiveServer

from .app import SLOW_REPLY
from .conftest import CHROMIUM, JS, REPO, Serve

SCREENSHOT = os.environ.get("DBOS_AGENTS_CHAT_SCREENSHOT")

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run .ci/setup-browser"),
]


@pytest.fixture(scope="module")
def server(serve: Serve, worker: WorkerProcess) -> LiveServer:
    return serve(chat_page=True, tokens_may_approve=True)


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 900, "height": 700})
    p = context.new_page()
    yield p
    context.close()


def _open(page: Page, server: LiveServer, agent: str) -> None:
    page.goto(f"{server.url}/chat/{agent}")
    expect(page.locator("#status")).to_have_attribute("data-status", "ready")


def _send(page: Page, text: str) -> None:
    page.fill("#composer input", text)
    page.press("#composer input", "Enter")


def _say_yes(page: Page, question: str) -> None:
    """Answer ``confirm`` (a yes/no schema: two buttons instead of a form) with yes."""
    ask = page.locator(".tool[data-tool=confirm] form.ask")
    expect(ask).to_be_visible(timeout=30_000)
    expect(ask.locator(".question")).to_have_text(question)
    expect(ask.locator("input")).to_have_count(0)
    ask.locator("button.yes").click()


def _expect_reply(page: Page, start: str) -> None:
    expect(page.locator(".message.assistant .text").last).to_contain_text(start, timeout=30_000)


def _session(page: Page, agent: str) -> str:
    chat_id = page.evaluate("window.dbosChat.id")
    return session_of_chat(SECRET, agent, chat_id)


def _stored_reply(client: AgentClient, sid: str) -> str:
    """The run's last reply, once the run has ended (the page shows it before the commit)."""
    client.wait(sid, timeout=60)
    return next(
        m.content for m in reversed(client.history(sid)) if m.role == "assistant" and m.content
    )


def _reply(page: Page) -> str:
    texts = page.locator(".message.assistant .text").all_text_contents()
    return "".join(texts)


def test_the_page_loads_only_what_the_server_serves(page: Page, server: LiveServer) -> None:
    hosts: set[str] = set()
    page.on("request", lambda r: hosts.add(r.url.split("/")[2]))
    _open(page, server, "talker")
    assert hosts == {server.url.split("/")[2]}
    csp = page.request.get(f"{server.url}/chat/talker").headers["content-security-policy"]
    assert "default-src 'none'" in csp


def test_a_client_tool_runs_in_the_browser(
    page: Page, server: LiveServer, harness: CrashHarness
) -> None:
    _open(page, server, "asker")
    _send(page, "Ship order 1042?")
    _say_yes(page, "Ship order 1042?")
    _expect_reply(page, "asker got:")
    sid = _session(page, "asker")
    reply = _stored_reply(harness.client, sid)
    assert '{"ok":true' in reply.replace(" ", "")


def test_an_approval_button_works(page: Page, server: LiveServer, harness: CrashHarness) -> None:
    _open(page, server, "closer")
    _send(page, "close acc-1")
    approve = page.locator(".tool button.approve")
    expect(approve).to_be_visible(timeout=30_000)
    approve.click()
    _expect_reply(page, "closer got:")
    assert "acc-1" in _stored_reply(harness.client, _session(page, "closer"))


def test_a_durable_tool_shows_its_notes_and_asks_in_the_page(
    page: Page, server: LiveServer, harness: CrashHarness
) -> None:
    _open(page, server, "keeper")
    _send(page, "close acc-7")
    notes = page.locator(".message.assistant .progress")
    expect(notes.first).to_have_text("checked_close: asking for approval", timeout=30_000)
    approve = page.locator(".tool button.approve")
    expect(approve).to_be_visible(timeout=30_000)
    expect(notes).to_contain_text(["checked_close: waiting for approval"])
    approve.click()
    _say_yes(page, "close acc-7?")
    _expect_reply(page, "keeper got:")
    reply = _stored_reply(harness.client, _session(page, "keeper"))
    assert "acc-7" in reply and '"by":' in reply.replace(" ", "")


def test_tokens_stream_in_and_a_killed_worker_leaves_the_stored_reply(
    page: Page, server: LiveServer, harness: CrashHarness, worker: WorkerProcess
) -> None:
    _open(page, server, "slow")
    # Every length the reply takes on screen, as the page renders it.
    page.evaluate(
        """() => { window.seen = [];
        new MutationObserver(() => {
          const t = [...document.querySelectorAll('.message.assistant .text')]
            .map(e => e.textContent).join('');
          if (window.seen.at(-1) !== t.length) window.seen.push(t.length);
        }).observe(document.querySelector('#messages'),
                   {childList: true, subtree: true, characterData: true}); }"""
    )
    _send(page, "go slowly")
    # (Polled from here: the page's CSP forbids the eval that wait_for_function needs.)
    deadline = time.monotonic() + 30
    while not page.evaluate("() => window.seen.some(n => n >= 120)"):
        assert time.monotonic() < deadline, page.evaluate("() => window.seen")
        time.sleep(0.05)
    if SCREENSHOT:
        page.screenshot(path=SCREENSHOT)
    sid = _session(page, "slow")
    worker.kill()
    shown_at_kill = len(_reply(page))
    assert 0 < shown_at_kill < len(SLOW_REPLY)
    replacement = harness.start_worker()
    try:
        expect(page.locator("#status")).to_have_attribute("data-status", "ready", timeout=60_000)
        assert _reply(page) == SLOW_REPLY == _stored_reply(harness.client, sid)
        seen: list[int] = page.evaluate("window.seen")
        # The reply grew piece by piece before the turn ended, and never went back.
        growing = [n for n in seen if 0 < n < len(SLOW_REPLY)]
        assert len(growing) >= 10, seen
        assert seen == sorted(seen), seen
    finally:
        # The module's worker from now on (its fixture stops it).
        worker.popen, worker.log_path = replacement.popen, replacement.log_path


def test_the_served_bundle_is_built_from_the_source(tmp_path: Path) -> None:
    """``static/chat.js`` is ``npm run build-chat-page``'s output of ``js/chat-page``."""
    if not (JS / "node_modules" / ".bin" / "esbuild").exists():
        pytest.fail("the JS tools are not installed: run `npm ci --prefix js`")
    out = tmp_path / "chat.js"
    subprocess.run(
        [
            str(JS / "node_modules" / ".bin" / "esbuild"),
            "chat-page/main.mjs",
            "--bundle",
            "--format=esm",
            "--minify",
            "--target=es2022",
            "--legal-comments=none",
            f"--outfile={out}",
        ],
        cwd=JS,
        check=True,
        capture_output=True,
    )
    served = REPO / "dbos_agents" / "server" / "chat_page" / "static" / "chat.js"
    assert out.read_bytes() == served.read_bytes(), "rebuild: npm run build-chat-page --prefix js"
