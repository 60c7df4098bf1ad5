"""The operator inbox in a real Chromium, against a real server and worker."""

from __future__ import annotations

import re
import time

import httpx
from playwright.sync_api import Locator, Page, expect

from dbos_agents import AgentClient, PendingCall
from tests.http.conftest import LiveServer

from .conftest import OTHER_TENANT, TENANT, StatementCounter, call_row, wait_pending

PATH = "boss \u203a middle \u203a leaf"  # the sub-agent path, as the page writes it


def card(page: Page, call: PendingCall) -> Locator:
    return page.locator(f"article.call[data-call='{call.root_session_id}/{call.tool_call_id}']")


def count(page: Page) -> int:
    return int(page.get_by_test_id("count").inner_text().rstrip("+"))


def test_approve_a_call_and_the_session_finishes(page: Page, client: AgentClient) -> None:
    sid = client.start("closer", "acc-7", tenant_id=TENANT)
    call = wait_pending(client, sid)
    page.reload()
    row = card(page, call)
    expect(row).to_contain_text("close_account")
    expect(row).to_contain_text("closer")
    expect(row).to_contain_text('"account_id": "acc-7"')
    expect(row.locator("time.countdown")).to_have_text(re.compile(r"^\d+[hms]"))
    assert count(page) >= 1

    row.locator("input[name=reason]").fill("customer asked twice")
    row.locator("button[value=approve]").click()
    expect(page.get_by_test_id("notice")).to_contain_text("Accepted")
    assert client.wait(sid, timeout=30).status == "completed"
    assert "closed" in (client.session(sid).final_output or "")
    page.reload()
    expect(card(page, call)).to_have_count(0)

    # The session page shows the transcript and who approved.
    page.goto(f"{page.url.split('/inbox')[0]}/inbox/sessions/{sid}")
    expect(page.get_by_test_id("session-status")).to_have_text("completed")
    expect(page.locator(f"tr[data-call='{sid}/{call.tool_call_id}']")).to_contain_text(
        "operator:alice"
    )
    expect(page.locator("ol.transcript")).to_contain_text("closer got:")
    assert call_row(client, sid, call.tool_call_id).submission == {
        "kind": "approval",
        "approved": True,
        "reason": "customer asked twice",
        "decided_by": "operator:alice",
    }


def test_deny_needs_a_reason_then_is_recorded(page: Page, client: AgentClient) -> None:
    sid = client.start("closer", "acc-8", tenant_id=TENANT)
    call = wait_pending(client, sid)
    page.reload()
    card(page, call).locator("button[value=deny]").click()
    expect(page.get_by_test_id("error")).to_contain_text("a denial needs a reason")
    assert call_row(client, sid, call.tool_call_id).status == "waiting"

    row = card(page, call)
    row.locator("input[name=reason]").fill("not the account holder")
    row.locator("button[value=deny]").click()
    expect(page.get_by_test_id("notice")).to_contain_text("Accepted")
    assert client.wait(sid, timeout=30).status == "completed"
    assert call_row(client, sid, call.tool_call_id).submission["approved"] is False  # type: ignore[index,call-overload]


def test_invalid_result_shows_the_validation_message_and_sends_nothing(
    page: Page, client: AgentClient
) -> None:
    sid = client.start("asker", "ship it?", tenant_id=TENANT)
    call = wait_pending(client, sid)
    page.reload()

    row = card(page, call)
    row.locator("textarea[name=result]").fill('{"ok": "yes please"}')
    row.locator("button:has-text('Submit result')").click()
    error = page.get_by_test_id("error")
    expect(error).to_contain_text("does not match the tool's output schema")
    expect(error).to_contain_text("ok: 'yes please' is not of type 'boolean'")
    expect(card(page, call).locator("textarea")).to_have_value('{"ok": "yes please"}')
    assert call_row(client, sid, call.tool_call_id).status == "waiting"

    row = card(page, call)
    row.locator("textarea[name=result]").fill("{not json")
    row.locator("button:has-text('Submit result')").click()
    expect(page.get_by_test_id("error")).to_contain_text("not valid JSON")
    assert call_row(client, sid, call.tool_call_id).status == "waiting"

    row = card(page, call)
    row.locator("textarea[name=result]").fill('{"ok": true, "note": "go"}')
    row.locator("button:has-text('Submit result')").click()
    expect(page.get_by_test_id("notice")).to_contain_text("Accepted")
    assert "asker got:" in (client.wait(sid, timeout=30).final_output or "")


def test_an_expired_call_shows_as_timed_out(page: Page, client: AgentClient) -> None:
    sid = client.start("impatient", "now", tenant_id=TENANT)
    call = wait_pending(client, sid)
    client.wait(sid, timeout=30)  # the 1 s deadline passed and the agent moved on
    assert call_row(client, sid, call.tool_call_id).status == "timed_out"
    page.reload()
    expect(card(page, call)).to_have_count(0)
    settled = page.locator(f"section.settled tr[data-call='{sid}/{call.tool_call_id}']")
    expect(settled).to_contain_text("timed out")
    expect(settled).to_contain_text("impatient")


def test_an_open_call_past_its_deadline_reads_timed_out(
    page: Page, client: AgentClient, server: LiveServer
) -> None:
    # Move the deadline into the past: the worker's own timer (10 min) has not fired, so
    # the row is still open, and the page must still read "timed out".
    sid = client.start("asker", "slow", tenant_id=TENANT)
    call = wait_pending(client, sid)
    with client.engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE dbos_agents.pending_calls SET deadline = now() - interval '1 second'"
            " WHERE root_session_id = %s AND tool_call_id = %s",
            (sid, call.tool_call_id),
        )
    page.reload()
    row = card(page, call)
    expect(row.locator("time.countdown")).to_have_text("timed out")
    expect(row).to_have_class(re.compile(r"\bexpired\b"))
    client.interrupt(sid)


def test_another_tenants_calls_never_appear(
    page: Page, client: AgentClient, server: LiveServer
) -> None:
    mine = client.start("asker", "mine", tenant_id=TENANT)
    theirs = client.start("closer", "theirs", tenant_id=OTHER_TENANT)
    nobody = client.start("asker", "no tenant")
    my_call = wait_pending(client, mine)
    their_call = wait_pending(client, theirs)
    wait_pending(client, nobody)
    page.reload()
    expect(card(page, my_call)).to_have_count(1)
    assert theirs not in page.content()
    assert nobody not in page.content()
    assert count(page) == len(client.pending(tenant_id=TENANT, limit=500))

    # Nor their sessions, nor a decision on them (even with a valid CSRF token).
    page.goto(f"{server.url}/inbox/sessions/{theirs}")
    expect(page.locator("[role=alert]")).to_contain_text("another user or tenant")
    page.goto(f"{server.url}/inbox")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    r = page.request.post(
        f"{server.url}/inbox/calls/{theirs}/{their_call.tool_call_id}/decide",
        form={"csrf": csrf or "", "decision": "approve"},
    )
    assert r.status == 403
    assert call_row(client, theirs, their_call.tool_call_id).status == "waiting"
    client.interrupt(theirs)
    client.interrupt(nobody)


def test_get_never_changes_state(page: Page, client: AgentClient, server: LiveServer) -> None:
    sid = client.start("closer", "acc-get", tenant_id=TENANT)
    call = wait_pending(client, sid)
    before = call_row(client, sid, call.tool_call_id)
    base = f"{server.url}/inbox"
    for url in (
        f"{base}",
        f"{base}?done=accepted&call={call.tool_call_id}",
        f"{base}?agent=closer&tool=close_account",
        f"{base}/sessions/{sid}",
        f"{base}/calls/{sid}/{call.tool_call_id}/decide?decision=approve",
        f"{base}/calls/{sid}/{call.tool_call_id}/result?result=true",
        f"{base}/sign-out",
    ):
        r = page.request.get(url)
        assert r.status in (200, 404, 405), (url, r.status)
    assert call_row(client, sid, call.tool_call_id) == before
    page.goto(base)
    expect(card(page, call)).to_have_count(1)  # still signed in, still waiting
    client.interrupt(sid)


def test_a_post_without_the_csrf_token_is_refused(
    page: Page, client: AgentClient, server: LiveServer
) -> None:
    sid = client.start("closer", "acc-csrf", tenant_id=TENANT)
    call = wait_pending(client, sid)
    url = f"{server.url}/inbox/calls/{sid}/{call.tool_call_id}/decide"
    for form in ({"decision": "approve"}, {"decision": "approve", "csrf": "0" * 64}):
        r = page.request.post(url, form=form)
        assert r.status == 403
        assert "CSRF" in r.text()
    r = page.request.post(f"{server.url}/inbox/sign-out", form={})
    assert r.status == 403
    assert call_row(client, sid, call.tool_call_id).status == "waiting"

    # A token from another sign-in (another browser) does not work either.
    with httpx.Client(base_url=server.url) as other:
        form = other.get("/inbox/sign-in").text
        token = re.search(r'name="csrf" value="([0-9a-f]+)"', form)
        assert token is not None
    r = page.request.post(url, form={"decision": "approve", "csrf": token.group(1)})
    assert r.status == 403
    assert call_row(client, sid, call.tool_call_id).status == "waiting"
    client.interrupt(sid)


def test_sign_in_is_required_and_checked(browser, server: LiveServer) -> None:  # type: ignore[no-untyped-def]
    context = browser.new_context()
    page = context.new_page()
    page.goto(f"{server.url}/inbox")
    assert page.url.endswith("/inbox/sign-in")  # redirected, nothing listed
    page.fill("input[name=name]", "mallory")
    page.fill("input[name=token]", "wrong-token-" + "z" * 32)
    page.click("button:has-text('Sign in')")
    expect(page.locator("[role=alert]")).to_contain_text("wrong operator token")
    cookie = next(c for c in context.cookies() if c["name"] == "dbos_agents_inbox")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    page.goto(f"{server.url}/inbox")
    assert page.url.endswith("/inbox/sign-in")
    context.close()


def test_the_list_is_one_query_whatever_its_length(
    page: Page, client: AgentClient, server: LiveServer, statements: StatementCounter
) -> None:
    def statements_for_one_page() -> int:
        before = statements.count
        page.reload()
        return statements.count - before

    sessions = [client.start("boss", f"deep {i}", tenant_id=TENANT) for i in range(2)]
    for sid in sessions:
        wait_pending(client, sid)
    few = statements_for_one_page()
    sessions += [client.start("asker", f"more {i}", tenant_id=TENANT) for i in range(4)]
    for sid in sessions[2:]:
        wait_pending(client, sid)
    many = statements_for_one_page()
    assert few == many == 3  # the open list, the settled list, the runs no worker takes
    expect(page.locator("article.call").filter(has_text="confirm").first).to_be_visible()
    deep = page.locator("article.call .path").filter(has_text=PATH)
    expect(deep).to_have_count(2)
    page.select_option("select[name=agent]", "boss")
    page.click("button:has-text('Filter')")
    expect(page.locator("article.call")).to_have_count(2)
    assert count(page) >= 6  # the count is all that waits, not what the filter shows
    for sid in sessions:
        client.interrupt(sid)


def test_metrics_show_the_pending_gauges(client: AgentClient, server: LiveServer) -> None:
    sid = client.start("asker", "gauge", tenant_id=TENANT)
    wait_pending(client, sid)
    time.sleep(0.01)  # so the oldest wait has a nonzero age
    body = httpx.get(f"{server.url}/metrics").text
    count_line = re.search(r"^dbos_agents_pending_calls (\S+)$", body, re.M)
    age_line = re.search(r"^dbos_agents_pending_oldest_age_seconds (\S+)$", body, re.M)
    assert count_line is not None and age_line is not None
    assert float(count_line.group(1)) >= 1
    assert float(age_line.group(1)) > 0
    client.interrupt(sid)
    body = httpx.get(f"{server.url}/metrics").text
    after = re.search(r"^dbos_agents_pending_calls (\S+)$", body, re.M)
    assert after is not None and float(after.group(1)) == float(count_line.group(1)) - 1


def test_runs_no_live_worker_takes_are_shown_as_waiting(page: Page, client: AgentClient) -> None:
    """A worker that ran ``gone_desk`` has stopped: a start of it queues, and the inbox says
    which agent's runs wait for a worker and since when (issue 43)."""
    from dbos_agents.store import workers

    workers.register(client.engine, "gone-desk-worker", "i-1", "dbos-agents-1", ["gone_desk"])
    workers.mark_stopped(client.engine, "gone-desk-worker")
    sid = client.start("gone_desk", "anyone there?", tenant_id=TENANT)
    try:
        page.reload()
        banner = page.get_by_test_id("queued")
        expect(banner).to_contain_text("1 run of agent gone_desk")
        expect(banner).to_contain_text("no live worker runs this agent")
    finally:
        client.interrupt(sid)
    page.reload()
    expect(page.get_by_test_id("queued")).to_have_count(0)
