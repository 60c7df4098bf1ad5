"""Agents as MCP tools, through the ``mcp`` SDK's client over streamable HTTP: the tool
list, a call's final answer, a client tool and an approval as ``input_required`` (2026-07-28)
or a mid-call elicitation (2025-11-25), continuing a session, and the errors."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from dbos_agents import AgentClient
from dbos_agents.server.mcp.catalogue import SESSION_META, TOKEN_META
from tests.crash.waiting import until

from .conftest import MODERN, mcp_client

pytestmark = pytest.mark.integration

Answer = Callable[[types.ElicitRequestParams], types.ElicitResult]


def run(coro: Awaitable[Any]) -> Any:
    return asyncio.run(coro)  # type: ignore[arg-type]


def answering(answer: Answer, seen: list[types.ElicitRequestParams]) -> Any:
    """An elicitation callback that records each question and answers it."""

    async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        seen.append(params)
        return answer(params)

    return callback


def accept(content: dict[str, Any]) -> Answer:
    return lambda _: types.ElicitResult(action="accept", content=content)


def text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def got(result: types.CallToolResult, agent: str) -> Any:
    """The tool result an agent reported (``<agent> got: <JSON>``), parsed."""
    prefix, _, body = text(result).partition(": ")
    assert prefix == f"{agent} got", text(result)
    return json.loads(body)


def test_tools_are_the_agents_with_their_descriptions(open_server: str) -> None:
    async def scenario() -> list[types.Tool]:
        async with mcp_client(open_server) as c:
            return (await c.list_tools()).tools

    tools = {t.name: t for t in run(scenario())}
    assert set(tools) == {"chat", "asker", "planner", "closer", "breaker"}
    assert tools["chat"].description == "Echoes the message back, numbered by turn."
    assert tools["chat"].input_schema["required"] == ["message"]


def test_a_call_returns_the_final_answer_and_continues_by_meta(
    open_server: str, agent_client: AgentClient
) -> None:
    async def scenario() -> tuple[types.CallToolResult, types.CallToolResult]:
        async with mcp_client(open_server) as c:
            first = await c.call_tool("chat", {"message": "hello"})
        token = (first.meta or {})[TOKEN_META]
        sid = (first.meta or {})[SESSION_META]
        # Continuing a session needs its token (or the hook), as the REST API's follow-up.
        async with mcp_client(open_server, headers={"Authorization": f"Bearer {token}"}) as c:
            second = await c.call_tool("chat", {"message": "again"}, meta={SESSION_META: sid})
        return first, second

    first, second = run(scenario())
    assert not first.is_error and text(first) == "echo 0: hello"
    assert text(second) == "echo 1: again"
    sid = (first.meta or {})[SESSION_META]
    assert (second.meta or {})[SESSION_META] == sid
    assert agent_client.session(sid).run_seq == 2


@pytest.mark.parametrize("mode", [MODERN, "legacy"])
def test_a_client_tool_is_asked_and_its_answer_completes_the_run(
    open_server: str, mode: str
) -> None:
    seen: list[types.ElicitRequestParams] = []

    async def scenario() -> types.CallToolResult:
        callback = answering(accept({"ok": True, "note": "fine"}), seen)
        async with mcp_client(open_server, mode=mode, elicitation_callback=callback) as c:
            return await c.call_tool("asker", {"message": "ship it?"})

    result = run(scenario())
    assert not result.is_error
    assert got(result, "asker") == {"ok": True, "note": "fine"}
    (question,) = seen
    assert isinstance(question, types.ElicitRequestFormParams)
    assert "confirm" in question.message and "ship it?" in question.message
    assert question.requested_schema["properties"]["ok"]["type"] == "boolean"
    assert question.requested_schema["required"] == ["ok"]


def test_input_required_by_hand_across_two_clients(
    open_server: str, agent_client: AgentClient
) -> None:
    """The retry is a new client (a new connection): the state carries everything."""

    async def scenario() -> tuple[types.InputRequiredResult, types.CallToolResult]:
        callback = answering(accept({}), [])
        async with mcp_client(open_server, elicitation_callback=callback) as c:
            asked = await c.session.call_tool(
                "asker", {"message": "by hand?"}, allow_input_required=True
            )
        assert isinstance(asked, types.InputRequiredResult)
        (key,) = (asked.input_requests or {}).keys()
        async with mcp_client(open_server, elicitation_callback=callback) as c:
            done = await c.session.call_tool(
                "asker",
                {"message": "by hand?"},
                input_responses={key: types.ElicitResult(action="accept", content={"ok": False})},
                request_state=asked.request_state,
                allow_input_required=True,
            )
        assert isinstance(done, types.CallToolResult)
        return asked, done

    asked, done = run(scenario())
    sid = (asked.meta or {})[SESSION_META]
    assert (done.meta or {})[SESSION_META] == sid
    assert got(done, "asker") == {"ok": False}
    assert agent_client.session(sid).status == "completed"


def test_a_result_that_nests_is_one_json_field_and_a_bad_answer_is_asked_again(
    open_server: str,
) -> None:
    seen: list[types.ElicitRequestParams] = []
    answers = iter(
        [
            {"result": "three steps, roughly"},  # not the schema: asked again
            {"result": json.dumps({"steps": [{"title": "draft", "minutes": 5}]})},
        ]
    )

    async def scenario() -> types.CallToolResult:
        callback = answering(
            lambda _: types.ElicitResult(action="accept", content=next(answers)), seen
        )
        async with mcp_client(open_server, elicitation_callback=callback) as c:
            return await c.call_tool("planner", {"message": "a launch"})

    result = run(scenario())
    assert got(result, "planner") == {"steps": [{"title": "draft", "minutes": 5}]}
    first, second = seen
    assert isinstance(first, types.ElicitRequestFormParams)
    assert isinstance(second, types.ElicitRequestFormParams)
    assert list(first.requested_schema["properties"]) == ["result"]
    assert "steps" in first.requested_schema["properties"]["result"]["description"]
    assert "refused" not in first.message
    assert second.message.startswith("The previous answer was refused:")


def test_declining_a_client_tool_is_an_error_the_model_reads(open_server: str) -> None:
    async def scenario() -> types.CallToolResult:
        callback = answering(lambda _: types.ElicitResult(action="decline"), [])
        async with mcp_client(open_server, elicitation_callback=callback) as c:
            return await c.call_tool("asker", {"message": "no?"})

    result = run(scenario())
    assert not result.is_error
    assert text(result).startswith("asker got:") and "declined" in text(result)


def test_an_answer_given_elsewhere_first_is_no_error(
    open_server: str, agent_client: AgentClient
) -> None:
    """The wait was answered (the REST API, the inbox) before the MCP client's retry: its
    own answer is ``already_completed``, and the call reads the run's end."""

    async def scenario() -> types.CallToolResult:
        callback = answering(accept({}), [])
        async with mcp_client(open_server, elicitation_callback=callback) as c:
            asked = await c.session.call_tool(
                "asker", {"message": "race"}, allow_input_required=True
            )
            assert isinstance(asked, types.InputRequiredResult)
            sid = (asked.meta or {})[SESSION_META]
            (key,) = (asked.input_requests or {}).keys()
            out = await asyncio.to_thread(
                agent_client.submit_tool_result, sid, key, result={"ok": True, "note": "inbox"}
            )
            assert out.status == "accepted"
            done = await c.session.call_tool(
                "asker",
                {"message": "race"},
                input_responses={key: types.ElicitResult(action="accept", content={"ok": False})},
                request_state=asked.request_state,
                allow_input_required=True,
            )
            assert isinstance(done, types.CallToolResult)
            return done

    assert got(run(scenario()), "asker") == {"ok": True, "note": "inbox"}


def test_a_failed_run_is_an_error_result(open_server: str) -> None:
    async def scenario() -> types.CallToolResult:
        async with mcp_client(open_server) as c:
            return await c.call_tool("breaker", {"message": "go"})

    result = run(scenario())
    assert result.is_error
    assert text(result).startswith("the agent's run ended failed")
    assert "model is down" in text(result)
    assert (result.meta or {})[SESSION_META]


def _refused(call: Callable[[], Awaitable[Any]]) -> MCPError:
    async def scenario() -> MCPError:
        try:
            await call()
        except MCPError as exc:
            return exc
        except BaseExceptionGroup as group:  # raised inside the client's task group
            found, _ = group.split(MCPError)
            while isinstance(found, BaseExceptionGroup):
                found = found.exceptions[0]  # type: ignore[assignment]
            if isinstance(found, MCPError):
                return found
            raise
        raise AssertionError("the call was not refused")

    err: MCPError = run(scenario())
    return err


def test_unknown_tools_bad_arguments_and_a_forged_state_are_mcp_errors(
    open_server: str,
) -> None:
    async def call(name: str, args: dict[str, Any], **kw: Any) -> Any:
        async with mcp_client(open_server) as c:
            return await c.session.call_tool(name, args, allow_input_required=True, **kw)

    unknown = _refused(lambda: call("nobody", {"message": "hi"}))
    assert unknown.code == types.INVALID_PARAMS
    assert unknown.error.data == {"error": "UNKNOWN_AGENT"}

    bad = _refused(lambda: call("chat", {"text": "hi"}))
    assert bad.code == types.INVALID_PARAMS
    assert bad.error.data == {"error": "INVALID_REQUEST"}
    assert "message" in bad.error.message

    async def forged() -> Any:
        callback = answering(accept({}), [])
        async with mcp_client(open_server, elicitation_callback=callback) as c:
            asked = await c.session.call_tool("asker", {"message": "f"}, allow_input_required=True)
            assert isinstance(asked, types.InputRequiredResult)
            state = asked.request_state or ""
            tampered = state[:-2] + ("AA" if not state.endswith("AA") else "BB")
            return await c.session.call_tool(
                "asker", {"message": "f"}, request_state=tampered, allow_input_required=True
            )

    forgery = _refused(forged)
    assert forgery.code == types.INVALID_PARAMS
    assert forgery.error.message == "Invalid or expired requestState"


def test_the_hook_and_tenant_scoping_of_the_rest_api(
    hook_server: str, agent_client: AgentClient
) -> None:
    ada = {"x-user": "ada@t1"}

    async def tools() -> list[str]:
        async with mcp_client(hook_server, headers=ada) as c:
            return sorted(t.name for t in (await c.list_tools()).tools)

    # No mcp_agents: the agents the worker publishes.
    assert run(tools()) == ["asker", "breaker", "chat", "closer", "planner"]

    async def start() -> types.CallToolResult:
        async with mcp_client(hook_server, headers=ada) as c:
            return await c.call_tool("chat", {"message": "mine"})

    result = run(start())
    sid = (result.meta or {})[SESSION_META]
    info = agent_client.session(sid)
    assert (info.user_id, info.tenant_id) == ("ada", "t1")

    async def as_(headers: dict[str, str], meta: dict[str, Any] | None = None) -> Any:
        async with mcp_client(hook_server, headers=headers) as c:
            return await c.session.call_tool("chat", {"message": "x"}, meta=meta)

    stranger = _refused(lambda: as_({"x-user": "bob@t2"}, {SESSION_META: sid}))
    assert stranger.code == types.INVALID_REQUEST
    assert stranger.error.data == {"error": "ACCESS_DENIED"}
    nobody = _refused(lambda: as_({}))
    assert nobody.error.data == {"error": "UNAUTHORIZED"}
    assert agent_client.session(sid).run_seq == 1  # neither reached the session


def test_an_approval_is_asked_of_a_signed_in_approver(
    hook_server: str, agent_client: AgentClient
) -> None:
    seen: list[types.ElicitRequestParams] = []

    async def scenario() -> types.CallToolResult:
        callback = answering(accept({"approved": True, "reason": "checked"}), seen)
        async with mcp_client(
            hook_server, headers={"x-user": "ada@t1"}, elicitation_callback=callback
        ) as c:
            return await c.call_tool("closer", {"message": "close it"})

    result = run(scenario())
    assert got(result, "closer") == {"closed": "acc-1"}
    (question,) = seen
    assert isinstance(question, types.ElicitRequestFormParams)
    assert question.requested_schema["required"] == ["approved"]
    assert "close_account" in question.message
    sid = (result.meta or {})[SESSION_META]
    (decision,) = agent_client.pending(session_id=sid, include_resolved=True)
    assert isinstance(decision.submission, dict)
    assert decision.submission["decided_by"] == "ada@t1"
    assert decision.submission["approved"] is True


@pytest.fixture(scope="module")
def polling_server(fresh_database_url: str, worker: Any) -> Any:
    """Anonymous callers who may not approve; a call answers "still running" after 0.3 s."""
    from dbos_agents.server import create_app
    from tests.http.conftest import LiveServer

    from .conftest import settings

    s = settings(fresh_database_url, allow_unauthenticated=True, mcp_max_wait_sec=0.3)
    server = LiveServer(create_app(s)).start()
    yield f"{server.url}/mcp"
    server.stop()


def test_a_wait_the_caller_may_not_answer_is_waited_out(
    polling_server: str, agent_client: AgentClient
) -> None:
    """An approval needs an approver: the anonymous MCP caller is not asked; its call
    answers "still running" (the state alone) and the SDK calls again until an operator
    decides elsewhere."""
    seen: list[types.ElicitRequestParams] = []

    def approvals() -> list[Any]:
        return [
            p
            for p in agent_client.pending(kind="approval")
            if p.user_id is None and p.status == "waiting"
        ]

    async def operator() -> None:
        await asyncio.to_thread(until, approvals)
        await asyncio.sleep(1.0)  # a few "still running" rounds
        (wait,) = approvals()
        await asyncio.to_thread(
            agent_client.submit_approval,
            wait.root_session_id,
            wait.tool_call_id,
            True,
            decided_by="operator",
        )

    async def scenario() -> types.CallToolResult:
        callback = answering(accept({"approved": False}), seen)
        async with mcp_client(
            polling_server, elicitation_callback=callback, input_required_max_rounds=1000
        ) as c:
            result, _ = await asyncio.gather(
                c.call_tool("closer", {"message": "close it"}), operator()
            )
            return result

    result = run(scenario())
    assert got(result, "closer") == {"closed": "acc-1"}
    assert seen == []


def test_a_client_that_cannot_answer_gets_an_error_naming_the_wait(open_server: str) -> None:
    """No elicitation callback: the client declared no form elicitation."""

    async def scenario() -> types.CallToolResult:
        async with mcp_client(open_server) as c:
            return await c.call_tool("asker", {"message": "can you answer?"})

    result = run(scenario())
    assert result.is_error
    assert "confirm (client" in text(result) and "cannot answer" in text(result)
