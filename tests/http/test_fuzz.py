"""Fuzzing the published OpenAPI document (schemathesis + hypothesis) against a live server.

Every operation gets generated requests, both schema-conforming ("positive") and
deliberately broken ("negative"), with a valid session and token on session routes so the
cases reach the handlers. Two properties: no response is a 5xx, and a refused request (4xx)
changes no row. 1,000 cases in the default set; ``DBOS_AGENTS_FUZZ_CASES=10000`` (or the
``slow`` test) for the long run.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx
import pytest
import schemathesis
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from pydantic import SecretStr
from schemathesis import GenerationMode

from dbos_agents.server import ServerSettings, create_app

from .conftest import SECRET, LiveServer

pytestmark = pytest.mark.integration
TABLES = ("sessions", "messages", "tool_calls", "pending_calls")


@pytest.fixture(scope="module")
def app_and_server(fresh_database_url: str) -> Iterator[tuple[object, LiveServer]]:
    app = create_app(
        ServerSettings(
            database_url=fresh_database_url,
            secret=SecretStr(SECRET),
            allow_unauthenticated=True,
            events_poll_interval_sec=0.05,
            events_max_stream_sec=0.3,
        )
    )
    live = LiveServer(app).start()
    yield app, live
    live.stop()


def _fingerprint(engine: sa.Engine) -> tuple[int, ...]:
    sql = ", ".join(f"(SELECT count(*) FROM dbos_agents.{t})" for t in TABLES)
    with engine.connect() as conn:
        row = conn.execute(sa.text(f"SELECT {sql}, (SELECT count(*) FROM dbos.workflow_status)"))
        return tuple(int(x) for x in row.one())


def _fuzz(app_and_server: tuple[object, LiveServer], database_url: str, cases: int) -> int:
    app, live = app_and_server
    r = httpx.post(f"{live.url}/sessions", json={"agent": "chat", "message": "hi"})
    assert r.status_code == 201, r.text
    sid, token = r.json()["session_id"], r.json()["token"]
    schema = schemathesis.openapi.from_dict(app.openapi())  # type: ignore[attr-defined]
    ops = [o.ok() for o in schema.get_all_operations()]
    runs = [(op, mode) for op in ops for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)]
    engine = sa.create_engine(database_url.replace("postgresql://", "postgresql+psycopg://", 1))
    done = 0
    try:
        # Small input spaces (GET /healthz) run out of examples early: go round again,
        # with the budget left, until the requested number of requests went out.
        for _ in range(50):
            if done >= cases:
                break
            per_run = max(1, (cases - done) // len(runs) + 1)
            for op, mode in runs:
                fixed = {}
                if "{session_id}" in op.path:
                    fixed = {
                        "path_parameters": {"session_id": sid},
                        "headers": {"Authorization": f"Bearer {token}"},
                    }
                strategy = op.as_strategy(generation_mode=mode, **fixed)

                @settings(
                    max_examples=per_run,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=strategy)
                def one(case: object) -> None:
                    nonlocal done
                    before = _fingerprint(engine)
                    resp = case.call(base_url=live.url, timeout=10)  # type: ignore[attr-defined]
                    done += 1
                    where = f"{case.method} {case.formatted_path}: {resp.status_code}"  # type: ignore[attr-defined]
                    assert resp.status_code < 500, f"{where} {resp.text[:500]}"
                    if 400 <= resp.status_code < 500:
                        assert _fingerprint(engine) == before, f"{where} changed rows"

                try:
                    one()
                except Unsatisfiable:  # nothing to generate (e.g. no input to break): skip it
                    continue
    finally:
        engine.dispose()
    return done


def test_fuzz_the_api_no_5xx_and_refusals_change_nothing(
    app_and_server: tuple[object, LiveServer], fresh_database_url: str
) -> None:
    cases = int(os.environ.get("DBOS_AGENTS_FUZZ_CASES", "1000"))
    done = _fuzz(app_and_server, fresh_database_url, cases)
    print(f"fuzz: {done} requests, no 5xx, no refused request changed a row")
    assert done >= cases


@pytest.mark.slow
def test_fuzz_the_api_ten_thousand_cases(
    app_and_server: tuple[object, LiveServer], fresh_database_url: str
) -> None:
    done = _fuzz(app_and_server, fresh_database_url, 10_000)
    print(f"fuzz: {done} requests, no 5xx, no refused request changed a row")
    assert done >= 10_000
