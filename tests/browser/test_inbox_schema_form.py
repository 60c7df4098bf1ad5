"""The inbox answers a client tool with fields made from its output schema (the module the
chat page shares), kept in step with the JSON box the form submits."""

from __future__ import annotations

import json

from playwright.sync_api import Page, expect

from dbos_agents import AgentClient
from tests.http.conftest import LiveServer

from .conftest import TENANT, call_row, wait_pending


def test_a_client_tool_is_answered_with_fields_from_its_schema(
    page: Page, client: AgentClient, server: LiveServer
) -> None:
    sid = client.start("asker", "ship it?", tenant_id=TENANT)
    call = wait_pending(client, sid)
    page.reload()
    row = page.locator(f"article.call[data-call='{call.root_session_id}/{call.tool_call_id}']")
    fields = row.locator(".schema-fields")
    expect(fields.locator("input[name=ok]")).to_have_attribute("type", "checkbox")
    expect(fields.locator("label")).to_have_text(["Ok *", "Note"])
    fields.locator("input[name=ok]").check()
    fields.locator("input[name=note]").fill("from the fields")
    box = row.locator("textarea[name=result]")
    assert json.loads(box.input_value()) == {"ok": True, "note": "from the fields"}
    # The shared module is served as a JavaScript module, from this server.
    js = page.request.get(f"{server.url}/inbox/static/schema-form.mjs")
    assert js.ok and js.headers["content-type"].startswith("text/javascript")

    row.locator("button:has-text('Submit result')").click()
    expect(page.get_by_test_id("notice")).to_contain_text("Accepted")
    assert "from the fields" in (client.wait(sid, timeout=30).final_output or "")
    assert call_row(client, sid, call.tool_call_id).status != "waiting"
