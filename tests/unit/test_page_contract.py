"""What a chat page may send an agent (``page_contract.py``): the contract a worker
publishes from its definition, and the refusals the client makes from it before anything
is stored (the worker's own check, ``loop/frontend.py``, stays the authority)."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from dbos_agents import Agent, client_tool, tool
from dbos_agents.errors import InvalidRequestError
from dbos_agents.loop import frontend
from dbos_agents.outcome import RunSpec
from dbos_agents.page_contract import contract_of, refusal
from dbos_agents.records import DeclaredTool, PageInput, with_page


class Board(BaseModel):
    color: str = "none"
    moves: list[str] = []


@tool
async def paint(color: str) -> str:
    return color


class Pick(BaseModel):
    color: str


class Prompt(BaseModel):
    prompt: str


ask_color = client_tool("ask_color", input=Prompt, output=Pick)


def _declared(name: str) -> DeclaredTool:
    return DeclaredTool(name=name, description="", parameters={"type": "object"})


def test_the_contract_is_json_and_names_the_agents_own_tools() -> None:
    agent = Agent("painter", "x", tools=[paint, ask_color], state=Board, frontend_tools=["pick"])
    contract = contract_of(agent)
    assert contract["tools"] == ["ask_color", "paint"]
    assert contract["frontend_tools"] == ["pick"]
    assert contract["state_schema"] is not None and "color" in str(contract["state_schema"])
    assert contract_of(Agent("plain", "x"))["state_schema"] is None


def test_a_declared_tool_named_like_the_agents_own_is_refused_naming_it() -> None:
    contract = contract_of(Agent("painter", "x", tools=[paint], frontend_tools=True))
    page = PageInput(tools=[_declared("pick"), _declared("paint")])
    problem = refusal("painter", contract, page)
    assert isinstance(problem, InvalidRequestError)
    assert str(problem).startswith("tools[1].name: agent 'painter' has a tool named")


def test_a_tool_the_agent_does_not_take_is_no_collision() -> None:
    """A page's tool the agent does not allow is ignored by the run: nothing to refuse."""
    contract = contract_of(Agent("painter", "x", tools=[paint], frontend_tools=["pick"]))
    assert refusal("painter", contract, PageInput(tools=[_declared("paint")])) is None


@pytest.mark.parametrize(
    ("state", "field"),
    [({"color": 3}, "state.color: "), ({"moves": ["a", 2]}, "state.moves[1]: ")],
)
def test_a_state_the_model_refuses_names_the_field(state: dict[str, object], field: str) -> None:
    contract = contract_of(Agent("painter", "x", state=Board))
    problem = refusal("painter", contract, PageInput(state=state))  # type: ignore[typeddict-item]
    assert isinstance(problem, InvalidRequestError)
    assert str(problem).startswith(field), problem
    assert refusal("painter", contract, PageInput(state={"color": "teal"})) is None


def test_the_worker_refuses_a_collision_the_client_could_not_see() -> None:
    """No contract published (an earlier release): the run's own check still refuses."""
    agent = Agent("painter", "x", tools=[paint], frontend_tools=True)
    spec = RunSpec(
        session_id="s",
        root_session_id="s",
        parent_session_id=None,
        agent="painter",
        run_seq=1,
        message="hi",
        user_id=None,
        tenant_id=None,
    )
    with pytest.raises(InvalidRequestError, match="the page declares paint"):
        frontend.view(with_page(spec, PageInput(tools=[_declared("paint")])), agent)
