"""Signing in through the authenticate hook (operation ``operate``): the principal's
subject becomes the operator, its tenant scopes the inbox."""

from __future__ import annotations

import re
from collections.abc import Iterator

import httpx
import pytest
from fastapi import HTTPException, Request

from dbos_agents import AgentClient
from dbos_agents.server import Principal, ServerSettings, create_app
from dbos_agents.server.auth import Operation
from tests.http.conftest import LiveServer

from .conftest import OTHER_TENANT, TENANT, wait_pending

SEEN: list[Operation] = []


def hook(request: Request, operation: Operation, session_id: str | None) -> Principal | None:
    SEEN.append(operation)
    if operation != "operate":
        return None
    user = request.headers.get("x-sso-user")
    if user is None:
        raise HTTPException(401, "not signed in at the proxy")
    return Principal(subject=user, tenant_id=OTHER_TENANT)


@pytest.fixture(scope="module")
def hook_server(server_client: AgentClient) -> Iterator[LiveServer]:
    settings = ServerSettings(database_url=server_client.database_url, inbox=True)
    live = LiveServer(create_app(settings, authenticate=hook, client=server_client)).start()
    yield live
    live.stop()


def _csrf(html: str) -> str:
    m = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert m is not None
    return m.group(1)


def test_hook_sign_in_scopes_to_the_principals_tenant(
    hook_server: LiveServer, client: AgentClient, worker: object
) -> None:
    mine = client.start("closer", "acc-hook", tenant_id=OTHER_TENANT)
    not_mine = client.start("closer", "acc-other", tenant_id=TENANT)
    call = wait_pending(client, mine)
    wait_pending(client, not_mine)
    with httpx.Client(base_url=hook_server.url) as http:
        csrf = _csrf(http.get("/inbox/sign-in").text)
        refused = http.post("/inbox/sign-in", data={"csrf": csrf})
        assert refused.status_code == 401 and "not signed in at the proxy" in refused.text
        r = http.post("/inbox/sign-in", data={"csrf": csrf}, headers={"X-SSO-User": "bob"})
        assert r.status_code == 303 and "operate" in SEEN
        page = http.get("/inbox").text
        assert "operator:bob" in page and mine in page and not_mine not in page
        r = http.post(
            f"/inbox/calls/{mine}/{call.tool_call_id}/decide",
            data={"csrf": _csrf(page), "decision": "approve"},
        )
        assert r.status_code == 303
    assert client.wait(mine, timeout=30).status == "completed"
    done = client.pending(session_id=mine, include_resolved=True)
    assert done[0].submission["decided_by"] == "operator:bob"  # type: ignore[index,call-overload]
    client.interrupt(not_mine)
