"""``docs/inbox.png``: the inbox with a few pending calls. Runs only when asked:

DBOS_AGENTS_INBOX_SCREENSHOT=docs/inbox.png pytest tests/browser/test_screenshot.py
"""

from __future__ import annotations

import os

import pytest
from playwright.sync_api import Page, expect

from dbos_agents import AgentClient

from .conftest import TENANT, wait_pending

TARGET = os.environ.get("DBOS_AGENTS_INBOX_SCREENSHOT")


@pytest.mark.skipif(not TARGET, reason="set DBOS_AGENTS_INBOX_SCREENSHOT=<path.png>")
def test_screenshot(page: Page, client: AgentClient) -> None:
    assert TARGET is not None
    timed_out = client.start("impatient", "quick?", tenant_id=TENANT)
    wait_pending(client, timed_out)
    client.wait(timed_out, timeout=30)
    started = [
        client.start("closer", "acc-4711", tenant_id=TENANT),
        client.start("asker", "Ship order 1042 to the new address?", tenant_id=TENANT),
        client.start("boss", "Confirm the refund with the customer", tenant_id=TENANT),
    ]
    for sid in started:
        wait_pending(client, sid)
    page.set_viewport_size({"width": 1100, "height": 900})
    page.reload()
    expect(page.locator("article.call")).to_have_count(3)
    page.screenshot(path=TARGET, full_page=True)
    for sid in started:
        client.interrupt(sid)
