"""A model named by a string: resolved where the agent or runtime is defined, with a
clear error for a malformed name, an unknown provider or a missing extra."""

from __future__ import annotations

import importlib.util

import pytest

from dbos_agents import Agent, DefinitionError
from dbos_agents.models import AnthropicModel, FallbackModel, OpenAIModel
from dbos_agents.models.resolve import model_from


def test_provider_strings_build_their_adapters(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    agent = Agent("a", model="anthropic:claude-haiku-4-5")
    assert isinstance(agent.model, AnthropicModel) and agent.model.name == "claude-haiku-4-5"
    fallback = FallbackModel("anthropic:claude-haiku-4-5", "openai:gpt-4.1-mini")
    assert [type(m) for m in fallback.models] == [AnthropicModel, OpenAIModel]


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("gpt-4.1", "write it as 'provider:model'"),
        ("openai:", "write it as 'provider:model'"),
        ("gemini:flash", "Unknown model: gemini:flash"),  # not a provider Pydantic AI knows
    ],
)
def test_bad_names_are_definition_errors(spec: str, says: str) -> None:
    with pytest.raises(DefinitionError, match=f"model '{spec}'") as err:
        Agent("a", model=spec)
    assert says in str(err.value)
    assert str(err.value).startswith("invalid agent 'a': "), err.value  # which agent


def test_a_missing_extra_names_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "anthropic" else real(n, *a)
    )
    with pytest.raises(DefinitionError, match=r"pip install 'dbos-agents\[anthropic\]'"):
        model_from("anthropic:claude-haiku-4-5")


def test_other_providers_need_the_bridge_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "pydantic_ai" else real(n, *a)
    )
    with pytest.raises(DefinitionError) as err:
        model_from("google:gemini-2.5-flash")
    assert "'google' is not one of ours (anthropic, openai)" in str(err.value)
    assert "pip install 'dbos-agents[pydantic-ai]'" in str(err.value)
