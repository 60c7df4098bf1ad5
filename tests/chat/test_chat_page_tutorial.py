"""The chat page with the agent of docs/first-agent.md (its ``myagent.py`` block, written to a
folder of its own and run by a worker subprocess), in Debian's Chromium driven by playwright:
the ``ask_customer`` form made from the tool's output schema, an approval the server refuses
with its message shown at the buttons, a reload mid-run that shows the conversation and
resumes, a lost connection that says so and resumes, and a worker SIGKILLed mid-run.

``DBOS_AGENTS_CHAT_SCREENSHOTS=docs/images`` also saves the screenshots docs/ai-sdk.md shows.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, Route, expect

from dbos_agents import AgentClient
from dbos_agents.errors import SessionNotFoundError
from dbos_agents.server.chats import session_of_chat
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.http.conftest import SECRET, LiveServer

from .conftest import CHROMIUM, REPO, Serve

SHOTS = os.environ.get("DBOS_AGENTS_CHAT_SCREENSHOTS")
REPLY = "Done: 2 grinders are on their way."
FENCE = re.compile(r"^```python\n(# myagent\.py\n.*?)^```", re.M | re.S)

pytestmark = [
    pytest.mark.integration,
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium: run .ci/setup-browser"),
]


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    """A worker of the tutorial's own ``myagent.py``, copied from the page."""
    folder = tmp_path_factory.mktemp("shop")
    found = FENCE.search((REPO / "docs" / "first-agent.md").read_text())
    assert found is not None, "docs/first-agent.md has no `# myagent.py` block"
    (folder / "myagent.py").write_text(textwrap.dedent(found[1]))
    with CrashHarness(
        "myagent:runtime",
        fresh_database_url,
        cwd=folder,
        log_dir=tmp_path_factory.mktemp("tutorial-logs"),
        executor_id="tutorial-page-worker",
    ) as h:
        yield h


@pytest.fixture(scope="module")
def strict(serve: Serve, worker: WorkerProcess) -> LiveServer:
    """The server ``serve --allow-unauthenticated`` runs: a chat's token may not approve."""
    return serve(chat_page=True)


@pytest.fixture(scope="module")
def lenient(serve: Serve, worker: WorkerProcess) -> LiveServer:
    return serve(chat_page=True, tokens_may_approve=True)


@pytest.fixture()
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 760, "height": 760})
    p = context.new_page()
    yield p
    context.close()


def _shot(page: Page, name: str) -> None:
    if SHOTS:
        page.screenshot(path=str(Path(SHOTS) / f"chat-page-{name}.png"))


def _open(page: Page, server: LiveServer) -> None:
    page.goto(f"{server.url}/chat/shop")
    expect(page.locator("#status")).to_have_attribute("data-status", "ready")


def _send(page: Page, text: str) -> None:
    page.fill("#composer input", text)
    page.press("#composer input", "Enter")


def _session(page: Page) -> str:
    return session_of_chat(SECRET, "shop", page.evaluate("window.dbosChat.id"))


def _answer_quantity(page: Page, quantity: str) -> None:
    ask = page.locator(".tool[data-tool=ask_customer] form.ask")
    expect(ask).to_be_visible(timeout=30_000)
    expect(ask.locator(".question")).to_have_text("We have 3 grinders. How many?")
    ask.locator("input[name=quantity]").fill(quantity)
    ask.locator("button.submit").click()


def _approve_button(page: Page) -> object:
    button = page.locator(".tool[data-tool=place_order] button.approve")
    expect(button).to_be_visible(timeout=30_000)
    return button


def _approve(page: Page) -> None:
    page.locator(".tool[data-tool=place_order] button.approve").click()


def _stored_reply(client: AgentClient, sid: str) -> str:
    client.wait(sid, timeout=60)
    return next(
        m.content for m in reversed(client.history(sid)) if m.role == "assistant" and m.content
    )


def test_the_client_tool_is_a_form_from_its_schema_and_a_refused_approval_says_why(
    page: Page, strict: LiveServer, harness: CrashHarness
) -> None:
    _open(page, strict)
    _send(page, "I need grinders")
    ask = page.locator(".tool[data-tool=ask_customer] form.ask")
    expect(ask).to_be_visible(timeout=30_000)
    quantity = ask.locator("input[name=quantity]")
    expect(quantity).to_have_attribute("type", "number")
    expect(ask.locator("label")).to_have_text("Quantity *")
    # An empty answer is refused in the page; nothing is sent.
    ask.locator("button.submit").click()
    expect(ask.locator(".form-error")).to_have_text("Quantity is required")
    sid = _session(page)
    assert [r.tool for r in harness.client.pending(session_id=sid)] == ["ask_customer"]
    quantity.fill("2")
    _shot(page, "form")
    ask.locator("button.submit").click()

    _approve_button(page)
    answered = page.locator(".tool[data-tool=ask_customer] .tool-output")
    assert json.loads(answered.text_content() or "") == {"quantity": 2}
    _approve(page)
    refused = page.locator(".tool[data-tool=place_order] .refused")
    expect(refused).to_contain_text("approvals need an approver", timeout=30_000)
    expect(refused).to_contain_text("DBOS_AGENTS_SERVER_TOKENS_MAY_APPROVE")
    # The buttons are back, and the call still waits on the server.
    expect(page.locator(".tool[data-tool=place_order] button.approve")).to_be_visible()
    _shot(page, "approval-refused")
    assert [r.tool for r in harness.client.pending(session_id=sid)] == ["place_order"]


def test_a_reload_mid_run_shows_the_conversation_and_resumes(
    page: Page, lenient: LiveServer, harness: CrashHarness
) -> None:
    _open(page, lenient)
    _send(page, "I need grinders")
    expect(page.locator(".tool[data-tool=ask_customer] form.ask")).to_be_visible(timeout=30_000)
    page.reload()  # while the client tool waits: its form comes back with the resumed run
    expect(page.locator(".message.user")).to_have_text(["I need grinders"])
    _answer_quantity(page, "2")
    _approve_button(page)
    page.reload()
    # From the session: the user's message, the tools and their results, the waiting call.
    expect(page.locator(".message.user")).to_have_text(["I need grinders"])
    expect(page.locator(".tool[data-tool=check_stock] .tool-output")).to_have_text("3")
    answered = page.locator(".tool[data-tool=ask_customer] .tool-output")
    assert json.loads(answered.text_content() or "") == {"quantity": 2}
    _approve_button(page)
    _shot(page, "after-reload")
    _approve(page)
    expect(page.locator(".message.assistant .text").last).to_have_text(REPLY, timeout=30_000)
    assert _stored_reply(harness.client, _session(page)) == REPLY
    # A second reload of the ended run, on a phone-sized window: the whole conversation,
    # nothing to resume, nothing wider than the window.
    page.set_viewport_size({"width": 390, "height": 760})
    page.reload()
    expect(page.locator(".message.assistant .text").last).to_have_text(REPLY)
    expect(page.locator(".message.user")).to_have_text(["I need grinders"])
    expect(page.locator(".tool[data-tool=place_order] .tool-output")).to_contain_text(
        '"quantity":2'
    )
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    _shot(page, "phone")


def test_a_lost_connection_says_so_and_resumes(
    page: Page, lenient: LiveServer, harness: CrashHarness
) -> None:
    _open(page, lenient)
    _send(page, "I need grinders")
    _answer_quantity(page, "2")
    _approve_button(page)
    page.context.set_offline(True)
    _approve(page)
    connection = page.locator("#connection")
    expect(connection).to_contain_text("reconnecting")
    page.context.set_offline(False)
    expect(connection).to_be_hidden(timeout=30_000)
    # The approval never left the page: the call waits again.
    _approve_button(page)
    # A stream that ends without its finish part (a server restarting) is a lost connection
    # too: the first resume after this reload is cut, the page says so and resumes again.
    cuts: list[str] = []

    def cut_once(route: Route) -> None:
        if cuts:
            route.continue_()
            return
        cuts.append(route.request.url)
        route.fulfill(
            status=200,
            headers={"content-type": "text/event-stream"},
            body='data: {"type":"start","messageId":"cut"}\n\n',
        )

    page.route("**/ai-sdk/shop/*/stream", cut_once)
    page.reload()
    expect(connection).to_contain_text("reconnecting")
    expect(connection).to_be_hidden(timeout=30_000)
    assert len(cuts) == 1
    _approve_button(page)
    _approve(page)
    expect(page.locator(".message.assistant .text").last).to_have_text(REPLY, timeout=30_000)
    assert _stored_reply(harness.client, _session(page)) == REPLY


def test_a_worker_killed_mid_run_resumes_on_the_page(
    page: Page, lenient: LiveServer, harness: CrashHarness, worker: WorkerProcess
) -> None:
    _open(page, lenient)
    _send(page, "I need grinders")
    ask = page.locator(".tool[data-tool=ask_customer] form.ask")
    expect(ask).to_be_visible(timeout=30_000)
    worker.kill()
    _answer_quantity(page, "2")
    replacement = harness.start_worker()
    try:
        _approve_button(page)
        _approve(page)
        expect(page.locator(".message.assistant .text").last).to_have_text(REPLY, timeout=60_000)
        assert _stored_reply(harness.client, _session(page)) == REPLY
    finally:
        worker.popen, worker.log_path = replacement.popen, replacement.log_path


def test_a_chats_history_and_waits_need_its_token(
    page: Page, lenient: LiveServer, harness: CrashHarness
) -> None:
    """The page's reads are the session's: without the chat's token they are refused."""
    _open(page, lenient)
    _send(page, "I need grinders")
    expect(page.locator(".tool[data-tool=ask_customer] form.ask")).to_be_visible(timeout=30_000)
    chat_id = page.evaluate("window.dbosChat.id")
    token = page.evaluate(f"localStorage.getItem('dbos-agents-token:shop:{chat_id}')")
    for what in ("history", "pending"):
        url = f"{lenient.url}/chat/shop/{chat_id}/{what}"
        assert httpx.get(url).status_code == 401
        assert httpx.get(url, headers={"Authorization": "Bearer " + "x" * 40}).status_code == 401
        mine = httpx.get(url, headers={"Authorization": f"Bearer {token}"})
        assert mine.status_code == 200, mine.text
    waits = httpx.get(
        f"{lenient.url}/chat/shop/{chat_id}/pending", headers={"Authorization": f"Bearer {token}"}
    ).json()["pending"]
    assert [(w["tool"], w["outputSchema"]["required"]) for w in waits] == [
        ("ask_customer", ["quantity"])
    ]
    # A chat that was never started has no history (and no session is made by reading).
    fresh = httpx.get(f"{lenient.url}/chat/shop/never-started/history")
    assert fresh.json() == {"messages": [], "active": False}
    with pytest.raises(SessionNotFoundError):
        harness.client.session(session_of_chat(SECRET, "shop", "never-started"))


def test_an_answer_the_server_refuses_shows_its_message_at_the_form(
    page: Page, lenient: LiveServer, harness: CrashHarness
) -> None:
    """The session was interrupted while the form waited: the answer reaches no wait, and
    the page says so at the form (the stream's error part), not in a corner."""
    _open(page, lenient)
    _send(page, "I need grinders")
    ask = page.locator(".tool[data-tool=ask_customer] form.ask")
    expect(ask).to_be_visible(timeout=30_000)
    harness.client.interrupt(_session(page))
    _answer_quantity(page, "2")
    refused = page.locator(".tool[data-tool=ask_customer] .refused")
    expect(refused).to_contain_text("no open wait for tool call", timeout=30_000)
    expect(refused).to_contain_text("interrupted")
    expect(ask.locator("input[name=quantity]")).to_have_value("2")  # what was typed is kept
    expect(page.locator("#composer-error")).to_be_hidden()
