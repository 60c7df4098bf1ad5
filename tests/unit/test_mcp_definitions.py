"""``MCPServer`` as plain data: its definition errors, the retry policy per tool (hints
count only from a trusted server), the names a run's tools get, and the schemas we offer."""

from __future__ import annotations

import pytest

from dbos_agents import Agent, DefinitionError, tool
from dbos_agents.mcp import Hints, ListedTool, Listing, MCPServer
from dbos_agents.mcp.toolset import run_tools
from dbos_agents.mcp.validate import check_arguments, schema_problem

OBJ = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}


def listed(name: str, **hints: bool) -> ListedTool:
    return ListedTool(name=name, input_schema=OBJ, hints=Hints(**hints))


def test_a_server_is_a_url_or_a_command_list() -> None:
    assert MCPServer("https://x.example/mcp", name="x").transport == "http"
    assert MCPServer(["npx", "-y", "srv"], name="x").transport == "stdio"
    with pytest.raises(DefinitionError) as err:
        MCPServer("npx srv", name="x")
    assert "a command as a list" in str(err.value)


def test_every_problem_is_reported_at_once() -> None:
    with pytest.raises(DefinitionError) as err:
        MCPServer(
            ["srv"],
            name="bad name",
            headers={"a": "b"},
            safe_to_retry={"t"},
            verify={"t": "not callable"},  # type: ignore[dict-item]
        )
    text = str(err.value)
    for part in ("bad name", "headers are for an HTTP server", "not callable", "needs no verify"):
        assert part in text, text


def test_hints_count_only_from_a_trusted_server() -> None:
    untrusted = MCPServer("http://x/mcp", name="x")
    trusted = MCPServer("http://x/mcp", name="x", trust_hints=True, safe_to_retry={"mine"})
    for t in (listed("r", read_only=True), listed("i", idempotent=True)):
        assert untrusted.policy(t).retry is False
        assert "ignored: trust_hints=False" in untrusted.policy(t).reason
        assert trusted.policy(t).retry is True
    assert trusted.policy(listed("d", destructive=True)).retry is False
    assert trusted.policy(listed("mine", destructive=True)).retry is True  # the user says so
    assert untrusted.policy(listed("plain")).retry is False


def test_names_stay_the_server_s_unless_they_collide() -> None:
    a = MCPServer("http://a/mcp", name="crm")
    b = MCPServer("http://b/mcp", name="docs")
    listings = [
        Listing(server="crm", tools=[listed("search"), listed("get.contact"), listed("own")]),
        Listing(server="docs", tools=[listed("search")]),
    ]
    tools, notes = run_tools({"own"}, [a, b], listings)
    assert [t.name for t in tools] == ["crm_search", "get_contact", "crm_own", "docs_search"]
    assert [t.listed.name for t in tools] == ["search", "get.contact", "own", "search"]
    assert notes == []
    again, _ = run_tools({"own"}, [a, b], listings)  # a replay names them the same
    assert [t.name for t in again] == [t.name for t in tools]


def test_a_server_that_could_not_be_listed_becomes_a_note() -> None:
    a = MCPServer("http://a/mcp", name="crm")
    tools, notes = run_tools(set(), [a], [Listing(server="crm", error="cannot connect")])
    assert tools == [] and notes == [
        "The tools of MCP server 'crm' are unavailable in this run: cannot connect"
    ]


def test_an_agent_takes_servers_beside_tools_and_a_run_view_adds_their_tools() -> None:
    @tool
    def own(q: str) -> str:
        return q

    crm = MCPServer("http://a/mcp", name="crm")
    agent = Agent("a", "Be brief.", tools=[own, crm])
    assert agent.mcp_servers == {"crm": crm} and list(agent.tools) == ["own"]
    (mcp_tool,), _ = run_tools(
        agent.tool_names(), [crm], [Listing(server="crm", tools=[listed("x")])]
    )
    view = agent.with_run_tools([mcp_tool], ["crm is down"])
    assert list(view.tools) == ["own", "x"] and list(agent.tools) == ["own"]
    assert view.instructions == "Be brief.\n\ncrm is down" and agent.instructions == "Be brief."
    assert [n for n, _, _ in view.tool_specs()] == ["own", "x"]
    with pytest.raises(DefinitionError, match="two MCP servers are named"):
        Agent("b", tools=[crm, MCPServer("http://b/mcp", name="crm")])


def test_schemas_we_cannot_offer_and_arguments_that_fail_them() -> None:
    assert schema_problem(OBJ) is None
    assert "not a JSON Schema object" in (schema_problem({"type": "string"}) or "")
    assert "not valid JSON Schema" in (schema_problem({"type": "object", "required": 3}) or "")
    check_arguments(OBJ, {"q": "x"})
    with pytest.raises(ValueError, match="q: 3 is not of type 'string'"):
        check_arguments(OBJ, {"q": 3})
    with pytest.raises(ValueError, match=r"\(root\): 'q' is a required property"):
        check_arguments(OBJ, {})
