"""The real-model guard: on for the whole suite (tests/conftest.py loads the plugin)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from dbos_agents import Message, ModelError, TransientModelError
from dbos_agents.models import ModelRequest, OpenAIModel
from dbos_agents.models.guard import ALLOW_ENV, BLOCK_ENV, is_local, real_models_blocked
from dbos_agents.testing import allow_real_models, block_real_models
from dbos_agents.testing.fake_openai import FakeOpenAI, serve_fake_openai

REMOTE = "http://models.example.invalid/v1"
"""Not on this machine, and resolves nowhere (``.invalid``): nothing real is ever reached."""


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeOpenAI]:
    with serve_fake_openai() as f:
        yield f


def ask(model: OpenAIModel) -> str | None:
    request = ModelRequest(agent="a", messages=[Message(role="user", content="hi")])

    async def run() -> str | None:
        try:
            return (await model.complete(request)).text
        finally:
            await model.aclose()

    return asyncio.run(run())


def test_the_suite_runs_with_the_guard_on() -> None:
    assert os.environ.get(BLOCK_ENV) == "1"
    assert real_models_blocked()


def test_a_remote_endpoint_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ModelError, match="real model requests are blocked") as info:
        ask(OpenAIModel("gpt-4.1-mini", api_key="sk-test", base_url=REMOTE))
    assert not isinstance(info.value, TransientModelError)  # not retried by the model step
    assert ALLOW_ENV in str(info.value)


def test_the_default_openai_endpoint_is_refused() -> None:
    with pytest.raises(ModelError, match=r"api\.openai\.com.*real model requests are blocked"):
        ask(OpenAIModel("gpt-4.1-mini", api_key="sk-test"))


def test_allowing_real_models_lets_the_request_go_out() -> None:
    """The same call with the guard lifted gets as far as the network (a connection error
    on an unresolvable name): proof that the refusal above came from the guard."""
    with allow_real_models():
        assert not real_models_blocked()
        with pytest.raises(TransientModelError, match="connection failed"):
            ask(OpenAIModel("gpt-4.1-mini", api_key="sk-test", base_url=REMOTE, timeout=5))
    assert real_models_blocked()


def test_the_fake_local_server_still_works(fake: FakeOpenAI) -> None:
    fake.push_text("hello from the fake")
    assert ask(OpenAIModel(base_url=fake.base_url)) == "hello from the fake"
    fake.push_text("by name too")
    by_name = fake.base_url.replace("127.0.0.1", "localhost")
    assert ask(OpenAIModel(base_url=by_name)) == "by name too"


@pytest.mark.parametrize(
    ("url", "local"),
    [
        ("http://127.0.0.1:8000/v1", True),
        ("http://127.8.9.10/v1", True),
        ("http://localhost:11434/v1", True),
        ("http://api.localhost/v1", True),
        ("http://[::1]:8000/v1", True),
        ("https://api.openai.com/v1", False),
        ("http://10.0.0.5/v1", False),
        ("http://localhost.example.com/v1", False),
        ("http://127.0.0.1.nip.io/v1", False),
    ],
)
def test_what_counts_as_local(url: str, local: bool) -> None:
    assert is_local(url) is local


def _blocked_in_child(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in (BLOCK_ENV, ALLOW_ENV)}
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "from dbos_agents.models.guard import real_models_blocked;"
            " print(real_models_blocked())",
        ],
        env={**base, **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_worker_processes_inherit_the_guard_and_the_override() -> None:
    assert _blocked_in_child() == "False"  # off unless switched on
    assert _blocked_in_child(**{BLOCK_ENV: "1"}) == "True"
    assert _blocked_in_child(**{BLOCK_ENV: "1", ALLOW_ENV: "1"}) == "False"


def test_block_real_models_sets_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(BLOCK_ENV)
    assert not real_models_blocked()
    block_real_models()
    assert os.environ[BLOCK_ENV] == "1" and real_models_blocked()
