"""The one error mapping, over real HTTP, with a stand-in ``AgentClient`` that raises.

No database: the stand-in raises what the test asks for; the health check's engine points
at a closed port.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from dbos_agents import (
    DatabaseUnavailableError,
    InvalidRequestError,
    InvalidResultError,
    ModelError,
    NotRootSessionError,
    SessionBusyError,
    SessionNotFoundError,
)
from dbos_agents.client import AsyncAgentClient
from dbos_agents.server import ServerSettings, create_app

from .conftest import LiveServer

pytestmark = pytest.mark.integration


class RaisingClient:
    """Duck-types the ``AgentClient`` methods the routes call; raises ``self.error``."""

    def __init__(self) -> None:
        self.error: BaseException | None = None
        self.database_url = "postgresql://postgres@127.0.0.1:1/none"
        self.engine = sa.create_engine(
            "postgresql+psycopg://postgres@127.0.0.1:1/none", connect_args={"connect_timeout": 1}
        )

    def __getattr__(self, name: str) -> Any:
        def method(*args: object, **kwargs: object) -> object:
            if self.error is not None:
                raise self.error
            return "ses_fake"

        return method


@pytest.fixture(scope="module")
def fake() -> RaisingClient:
    return RaisingClient()


@pytest.fixture(scope="module")
def server(fake: RaisingClient) -> Iterator[LiveServer]:
    settings = ServerSettings(allow_unauthenticated=True, agents=["chat"])  # no secret: open
    client = AsyncAgentClient(fake)  # type: ignore[arg-type]
    live = LiveServer(create_app(settings, client=client)).start()
    yield live
    live.stop()


SUBMIT = {"kind": "client-tool-result", "tool_call_id": "c1", "result": {}}


@pytest.mark.parametrize(
    ("error", "method", "path", "body", "status", "code"),
    [
        (SessionNotFoundError("s1"), "GET", "/sessions/s1", None, 404, "SESSION_NOT_FOUND"),
        (SessionBusyError("s1", "running"), "POST", "/sessions/s1/messages", {"message": "m"},
         409, "SESSION_BUSY"),
        (InvalidRequestError("wrong kind"), "POST", "/sessions/s1/submit-tool-result", SUBMIT,
         400, "INVALID_REQUEST"),
        (NotRootSessionError("s1", "root"), "POST", "/sessions/s1/submit-tool-result", SUBMIT,
         400, "NOT_ROOT_SESSION"),
        (DatabaseUnavailableError("db at h:5432 does not answer"), "GET", "/sessions/s1/pending",
         None, 503, "DATABASE_UNAVAILABLE"),
        (sa.exc.OperationalError("SELECT", {}, Exception("gone")), "POST", "/sessions/s1/interrupt",
         None, 503, "DATABASE_UNAVAILABLE"),
        (ModelError("provider down"), "POST", "/sessions/s1/messages", {"message": "m"}, 500,
         "MODEL_ERROR"),
        (RuntimeError("secret internals"), "GET", "/sessions/s1", None, 500, "INTERNAL_ERROR"),
    ],
)  # fmt: skip
def test_errors_map_by_code(
    fake: RaisingClient,
    server: LiveServer,
    http: httpx.Client,
    error: BaseException,
    method: str,
    path: str,
    body: object,
    status: int,
    code: str,
) -> None:
    fake.error = error
    try:
        r = http.request(method, server.url + path, json=body)
    finally:
        fake.error = None
    assert r.status_code == status, r.text
    payload = r.json()
    assert payload["error"] == code and payload["message"]
    if code == "INTERNAL_ERROR":
        assert "secret internals" not in r.text


def test_invalid_result_carries_details(
    fake: RaisingClient, server: LiveServer, http: httpx.Client
) -> None:
    fake.error = InvalidResultError("bad", [{"path": "ok", "message": "'?' is not a boolean"}])
    try:
        r = http.post(f"{server.url}/sessions/s1/submit-tool-result", json=SUBMIT)
    finally:
        fake.error = None
    assert r.status_code == 400
    assert r.json() == {
        "error": "INVALID_RESULT",
        "message": "bad",
        "details": [{"path": "ok", "message": "'?' is not a boolean"}],
    }


def test_without_a_secret_no_token_and_agents_are_allowlisted(
    server: LiveServer, http: httpx.Client
) -> None:
    r = http.post(f"{server.url}/sessions", json={"agent": "chat", "message": "hi"})
    assert r.status_code == 201
    assert r.json() == {"session_id": "ses_fake", "token": None, "expires_at": None}
    r = http.post(f"{server.url}/sessions", json={"agent": "other", "message": "hi"})
    assert r.status_code == 404 and r.json()["error"] == "UNKNOWN_AGENT"
    assert http.post(f"{server.url}/sessions/ses_fake/token").status_code == 404


def test_healthz_is_503_when_the_database_does_not_answer(
    server: LiveServer, http: httpx.Client
) -> None:
    r = http.get(f"{server.url}/healthz")
    assert r.status_code == 503 and r.json()["status"] == "unavailable"
