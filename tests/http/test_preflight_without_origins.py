"""A CORS preflight to a server with no ``cors_origins`` is refused with a message that says
what to set (403 ``FORBIDDEN``), not the 405 of a route without OPTIONS."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from dbos_agents.server import ServerSettings, create_app

from .conftest import LiveServer

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server(fresh_database_url: str) -> Iterator[LiveServer]:
    live = LiveServer(
        create_app(ServerSettings(database_url=fresh_database_url, allow_unauthenticated=True))
    ).start()
    yield live
    live.stop()


def test_a_preflight_without_configured_origins_says_what_to_set(
    http: httpx.Client, server: LiveServer
) -> None:
    pre = http.options(
        f"{server.url}/ai-sdk/shop",
        headers={"Origin": "http://app.example", "Access-Control-Request-Method": "POST"},
    )
    assert pre.status_code == 403, pre.text
    body = pre.json()
    assert body["error"] == "FORBIDDEN"
    assert "DBOS_AGENTS_SERVER_CORS_ORIGINS" in body["message"]
    assert "http://app.example" in body["message"]
    assert "access-control-allow-origin" not in pre.headers
    # An OPTIONS that is no preflight is what it was: no such method (the documented code).
    plain = http.options(f"{server.url}/sessions")
    assert plain.status_code == 405
    assert plain.json()["error"] == "METHOD_NOT_ALLOWED"
