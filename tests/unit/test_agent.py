"""``Agent`` validation and ``UnknownAgentError``: plain data, no database."""

from __future__ import annotations

import math

import pytest

from dbos_agents import Agent, DefinitionError, UnknownAgentError, tool


@tool
def lookup(order_id: str) -> str:
    return order_id


@tool(name="lookup")
def lookup_again(order_id: str) -> str:
    return order_id


@tool(safe_to_retry=True)
def search(query: str) -> list[str]:
    return [query]


def raw_function(x: int) -> int:
    return x


def problems_of(**kwargs: object) -> list[str]:
    kwargs.setdefault("name", "support")
    with pytest.raises(DefinitionError) as info:
        Agent(**kwargs)  # type: ignore[arg-type]
    return info.value.problems


def test_valid_agent_keeps_its_definition() -> None:
    agent = Agent(
        "support",
        "Be brief.",
        tools=[lookup, search],
        max_turns=3,
        budget_tokens=1000,
        budget_usd=2,
        model_settings={"temperature": 0},
    )
    assert agent.name == "support"
    assert agent.instructions == "Be brief."
    assert agent.tools == {"lookup": lookup, "search": search}
    assert agent.max_turns == 3
    assert agent.budget_tokens == 1000
    assert agent.budget_usd == 2.0
    assert isinstance(agent.budget_usd, float)
    assert agent.model_settings == {"temperature": 0}
    assert repr(agent) == "Agent('support', tools=['lookup', 'search'])"


def test_defaults() -> None:
    agent = Agent("a")
    assert agent.instructions == ""
    assert agent.tools == {}
    assert agent.max_turns == 20
    assert agent.budget_tokens is None
    assert agent.budget_usd is None
    assert agent.model_settings == {}


def test_model_settings_are_copied() -> None:
    settings: dict[str, object] = {"temperature": 0}
    agent = Agent("a", model_settings=settings)
    settings["temperature"] = 1
    assert agent.model_settings == {"temperature": 0}


@pytest.mark.parametrize(
    "name", ["", "1agent", "has space", "a" * 65, "subagent__x", "client__x", "dot.ted"]
)
def test_bad_agent_name(name: str) -> None:
    problems = problems_of(name=name)
    assert len(problems) == 1
    assert problems[0].startswith(f"agent name {name!r}")


def test_non_string_instructions() -> None:
    assert problems_of(instructions=["not", "a", "string"]) == [
        "instructions must be a string or a function of the state"
    ]


def test_duplicate_tool_names() -> None:
    problems = problems_of(tools=[lookup, search, lookup_again])
    assert problems == ["tools: two tools are named 'lookup'"]


def test_same_tool_twice_is_a_duplicate() -> None:
    assert problems_of(tools=[search, search]) == ["tools: two tools are named 'search'"]


def test_non_tool_in_tools() -> None:
    problems = problems_of(tools=[lookup, raw_function])
    assert len(problems) == 1
    assert "raw_function" in problems[0]
    assert "is not a Tool" in problems[0]
    assert "@tool" in problems[0]


@pytest.mark.parametrize("max_turns", [0, -1, 1.5, "3"])
def test_bad_max_turns(max_turns: object) -> None:
    assert problems_of(max_turns=max_turns) == [f"max_turns must be an int >= 1, got {max_turns!r}"]


def test_max_turns_one_is_allowed() -> None:
    assert Agent("a", max_turns=1).max_turns == 1


@pytest.mark.parametrize("budget", [0, -5, 2.5])
def test_bad_budget_tokens(budget: object) -> None:
    assert problems_of(budget_tokens=budget) == [
        f"budget_tokens must be a positive int, got {budget!r}"
    ]


@pytest.mark.parametrize("budget", [0, 0.0, -0.01, "1"])
def test_bad_budget_usd(budget: object) -> None:
    assert problems_of(budget_usd=budget) == [
        f"budget_usd must be a positive number, got {budget!r}"
    ]


def test_small_positive_budget_usd_is_allowed() -> None:
    assert Agent("a", budget_usd=0.001).budget_usd == 0.001


def test_definition_error_lists_every_problem() -> None:
    with pytest.raises(DefinitionError) as info:
        Agent(
            "bad name",
            tools=[lookup, lookup_again, raw_function],  # type: ignore[list-item]
            max_turns=0,
            budget_tokens=-1,
            budget_usd=-1.0,
        )
    err = info.value
    assert err.subject == "agent 'bad name'"
    assert len(err.problems) == 6, err.problems
    expected = [
        "agent name 'bad name'",
        "two tools are named 'lookup'",
        "is not a Tool",
        "max_turns",
        "budget_tokens",
        "budget_usd",
    ]
    for fragment in expected:
        assert sum(fragment in p for p in err.problems) == 1, fragment
        assert fragment in str(err)
    assert isinstance(err, ValueError)
    assert err.code == "INVALID_DEFINITION"


@pytest.mark.parametrize(
    "kwargs",
    [{"max_turns": True}, {"budget_tokens": True}, {"budget_usd": math.nan}],
    ids=["max_turns-bool", "budget_tokens-bool", "budget_usd-nan"],
)
def test_bool_and_nan_limits_are_rejected(kwargs: dict[str, object]) -> None:
    with pytest.raises(DefinitionError):
        Agent("a", **kwargs)  # type: ignore[arg-type]


# --- UnknownAgentError ---------------------------------------------------------------------


def test_unknown_agent_error_names_no_other_agent() -> None:
    err = UnknownAgentError("billing", ["support", "research", "triage"])
    assert (err.name, err.known) == ("billing", ["support", "research", "triage"])
    assert str(err) == "unknown agent 'billing'"  # clients see it: no list of agents
    assert err.code == "UNKNOWN_AGENT"
    assert isinstance(err, LookupError)
