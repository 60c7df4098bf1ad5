"""AG-UI's page side, driven by the official client (``@ag-ui/client``'s ``HttpAgent``,
``js/ag-ui/page-tools.mjs``) against a real server and a real worker subprocess
(``tests.chat.page_app``): a frontend tool only the page declares, across a worker
SIGKILL; state posted by the page, changed by a tool, seen back as ``STATE_DELTA``s that
rebuild the snapshot; context in the instructions, forwarded props in a tool; bad input."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from dbos_agents import Agent, DefinitionError
from dbos_agents.server.chats import chat_session_id
from dbos_agents.server.context import ServerContext
from dbos_agents.store import workers
from dbos_agents.testing import CrashHarness, WorkerProcess
from tests.chat.conftest import REPO, Serve
from tests.chat.page_app import paint
from tests.http.conftest import LiveServer

pytestmark = pytest.mark.integration

Node = Callable[..., list[dict[str, Any]]]
CONTEXT = [{"description": "Page", "value": "the palette view"}]


@pytest.fixture(scope="module")
def harness(
    fresh_database_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[CrashHarness]:
    with CrashHarness(
        "tests.chat.page_app:runtime",
        fresh_database_url,
        cwd=REPO,
        log_dir=tmp_path_factory.mktemp("page-logs"),
        executor_id="page-tests-worker",
    ) as h:
        yield h


@pytest.fixture(scope="module")
def later_workers() -> Iterator[list[WorkerProcess]]:
    """Workers started in place of a killed one: they serve the module's later tests."""
    started: list[WorkerProcess] = []
    yield started
    for w in started:
        w.stop()


def session_of(server: LiveServer, agent: str, thread: str) -> str:
    ctx: ServerContext = server.server.config.app.state.dbos_agents
    return chat_session_id(ctx, agent, thread)


def types(run: dict[str, Any]) -> list[str]:
    return [e["type"] for e in run["events"]]


def transcript(run: dict[str, Any]) -> str:
    """The events as text (``pytest -s`` shows them: the closing note's transcript)."""
    lines = []
    for e in run["events"]:
        rest = {k: v for k, v in e.items() if k not in ("type", "timestamp", "rawEvent")}
        lines.append(f"{e['type']} {json.dumps(rest)}")
    return "\n".join(lines)


def rebuilt(run: dict[str, Any]) -> dict[str, Any]:
    """The client's state with the version key removed."""
    return {k: v for k, v in run["state"].items() if k != "_version"}


def test_declared_tool_and_state_deltas_across_a_sigkill(
    serve: Serve,
    worker: WorkerProcess,
    node: Node,
    harness: CrashHarness,
    later_workers: list[WorkerProcess],
) -> None:
    server = serve()
    t = f"t-{uuid.uuid4()}"
    base = {"url": server.url, "agent": "painter", "threadId": t}
    (first,) = node(
        "ag-ui/page-tools.mjs",
        json.dumps(
            {
                **base,
                "message": "pick a color",
                "state": {"owner": "ada"},
                "context": CONTEXT,
                "forwardedProps": {"theme": "dark"},
            }
        ),
    )
    print("\n--- run 1\n" + transcript(first))
    sid = session_of(server, "painter", t)
    assert first["error"] is None, first
    # The page's state was committed before the run (version 1), and the page told so.
    assert harness.client.state(sid) == {"color": "none", "moves": [], "owner": "ada"}
    # It learns its new version before the run ends.
    assert types(first)[-2:] == ["STATE_DELTA", "RUN_FINISHED"]
    assert first["events"][-2]["delta"] == [{"op": "add", "path": "/_version", "value": 1}]
    assert first["state"] == {"owner": "ada", "_version": 1}
    # The model called the tool only the page declared: the run waits on the page.
    starts = [e for e in first["events"] if e["type"] == "TOOL_CALL_START"]
    assert [e["toolCallName"] for e in starts] == ["pick_color"]
    finished = first["events"][-1]
    assert finished["type"] == "RUN_FINISHED"
    (call_id,) = finished["outcome"]["pendingToolCallIds"]
    (wait,) = harness.client.pending(session_id=sid)
    assert wait.tool == "pick_color" and wait.tool_call_id == call_id
    assert wait.arguments == {"prompt": "pick a color"}

    # The worker dies while the run waits; another takes the run over.
    worker.kill()
    time.sleep(0.5)
    later_workers.append(harness.start_worker())

    (second,) = node(
        "ag-ui/page-tools.mjs",
        json.dumps(
            {
                **base,
                "token": first["token"],
                "messages": first["messages"],
                "state": first["state"],
                "answer": "teal",
            }
        ),
        timeout=120,
    )
    print("\n--- run 2 (after the SIGKILL)\n" + transcript(second))
    assert second["error"] is None, second
    assert second["answered"] == call_id
    stored = harness.client.state(sid)
    assert stored == {"color": "teal", "moves": ["teal"], "owner": "ada"}
    # The tool's change came as a JSON Patch from what the page held, not a snapshot.
    kinds = types(second)
    assert "STATE_DELTA" in kinds and "STATE_SNAPSHOT" not in kinds
    (delta,) = [e["delta"] for e in second["events"] if e["type"] == "STATE_DELTA"]
    assert {op["path"] for op in delta} >= {"/color", "/_version"}
    # The deltas rebuilt the snapshot: the page's state is the session's, at its version.
    assert rebuilt(second) == stored
    version = harness.client.state_version(sid)
    assert version is not None and second["state"]["_version"] == version.version == 2
    # The answer quotes the page's result, the forwarded props, the board and the context.
    replies = [h.content for h in harness.client.history(sid) if h.role == "assistant"]
    reply = replies[-1]
    assert reply is not None
    assert reply.startswith('painter got: {"color":"teal"} then ')
    assert '"props":{"theme":"dark"}' in reply
    assert "Paint for ada; the board is teal." in reply
    assert "- Page: the palette view" in reply
    assert second["messages"][-1]["content"] == reply
    assert kinds[-1] == "RUN_FINISHED"

    # A follow-up whose state is older than the session's: 409, nothing changed.
    stale = {**second["state"], "owner": "eve", "_version": 1}
    (late,) = node(
        "ag-ui/page-tools.mjs",
        json.dumps(
            {
                **base,
                "token": first["token"],
                "messages": second["messages"],
                "state": stale,
                "message": "again",
            }
        ),
    )
    assert late["error"] is not None and late["error"]["status"] == 409, late
    assert harness.client.session(sid).run_seq == 1
    assert harness.client.state(sid) == stored


def test_an_agent_that_does_not_opt_in_never_offers_the_page_tools(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    server = serve()
    t = f"t-{uuid.uuid4()}"
    (run,) = node(
        "ag-ui/page-tools.mjs",
        json.dumps({"url": server.url, "agent": "plain", "threadId": t, "message": "pick"}),
    )
    assert run["error"] is None, run
    sid = session_of(server, "plain", t)
    assert harness.client.pending(session_id=sid) == []
    reply = run["messages"][-1]["content"]
    assert reply.startswith("plain got: ") and "unknown-tool" in reply, reply
    # A result for a frontend tool call the run never made: refused, nothing submitted.
    (answer,) = node(
        "ag-ui/page-tools.mjs",
        json.dumps(
            {
                "url": server.url,
                "agent": "plain",
                "threadId": t,
                "token": run["token"],
                "messages": [
                    *run["messages"],
                    {"id": "m-x", "role": "tool", "toolCallId": "call_never", "content": "{}"},
                ],
            }
        ),
    )
    errors = [e for e in answer["events"] if e["type"] == "RUN_ERROR"]
    assert [e["code"] for e in errors] == ["UNKNOWN_TOOL_CALL"], answer


def test_a_persistent_agent_takes_each_runs_page_tools_from_its_inbox(
    serve: Serve, worker: WorkerProcess, node: Node, harness: CrashHarness
) -> None:
    server = serve()
    t = f"t-{uuid.uuid4()}"
    base = {"url": server.url, "agent": "keeper", "threadId": t}
    other = {"name": "shout", "description": "", "parameters": {"type": "object"}}
    pick = {
        "name": "pick_color",
        "description": "Let the user pick a color in the page.",
        "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}},
    }
    messages: list[dict[str, Any]] = []
    state: dict[str, Any] = {"owner": "kim"}
    token = None
    for n, color in enumerate(["red", "blue"], start=1):
        (asked,) = node(
            "ag-ui/page-tools.mjs",
            json.dumps(
                {
                    **base,
                    "token": token,
                    "messages": messages,
                    "state": state,
                    "message": f"color {n}",
                    "tools": [pick, other],
                }
            ),
        )
        assert asked["error"] is None, asked
        token = token or asked["token"]
        (answered,) = node(
            "ag-ui/page-tools.mjs",
            json.dumps(
                {
                    **base,
                    "token": token,
                    "messages": asked["messages"],
                    "state": asked["state"],
                    "answer": color,
                    "tools": [pick, other],
                }
            ),
        )
        assert answered["error"] is None, answered
        messages, state = answered["messages"], answered["state"]
        reply = messages[-1]["content"]
        assert reply.startswith(f'keeper got: {{"color":"{color}"}} then '), reply
        assert reply.endswith("| tools: paint,pick_color"), reply  # not "shout"
    sid = session_of(server, "keeper", t)
    info = harness.client.session(sid)
    assert info.run_seq == 2 and info.workflow_id == sid  # run 2 came on run 1's inbox
    assert harness.client.state(sid) == {"color": "blue", "moves": ["red", "blue"], "owner": "kim"}
    assert {k: v for k, v in state.items() if k != "_version"} == harness.client.state(sid)


def _post(
    server: LiveServer, agent: str, token: str | None = None, **fields: Any
) -> httpx.Response:
    body = {"threadId": f"t-{uuid.uuid4()}", "runId": "r1", "messages": [], **fields}
    body["messages"] = body["messages"] or [{"id": "u1", "role": "user", "content": "hi"}]
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{server.url}/ag-ui/{agent}", json=body, headers=headers, timeout=30)


def test_bad_page_input_is_400_naming_the_field_and_starts_nothing(
    serve: Serve, worker: WorkerProcess, harness: CrashHarness
) -> None:
    server = serve()
    tool = {"name": "pick_color", "description": "", "parameters": {"type": "wat"}}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"tools": [tool]}, "tools[0].parameters"),
        ({"tools": [{**tool, "name": "no spaces"}]}, "tools[0].name"),
        ({"tools": [{**tool, "parameters": {"type": "string"}}]}, "tools[0].parameters"),
        ({"state": [1, 2]}, "state"),
        ({"state": {"owner": "x", "_version": "new"}}, "state._version"),
    ]
    before = len(harness.client.sessions())
    for fields, name in cases:
        r = _post(server, "painter", **fields)
        assert r.status_code == 400, (fields, r.text)
        assert r.json()["message"].startswith(f"{name}: "), r.json()
    assert len(harness.client.sessions()) == before


def test_what_the_agents_workers_would_refuse_is_400_naming_the_field_and_stores_nothing(
    serve: Serve, worker: WorkerProcess, harness: CrashHarness
) -> None:
    """Checked against what the worker published (``page_contract.py``) before anything is
    stored: a declared tool named like the agent's own, a state its model refuses; for a
    new thread and for a thread that has a session already."""
    server = serve()
    deadline = time.monotonic() + 60  # the worker publishes as it launches
    while workers.page_contract(harness.client.engine, "painter", 30) is None:
        assert time.monotonic() < deadline, "the worker published no page contract"
        time.sleep(0.1)
    own = {"name": "paint", "description": "", "parameters": {"type": "object"}}
    cases: list[tuple[dict[str, Any], str]] = [
        ({"tools": [own]}, "tools[0].name: agent 'painter' has a tool named 'paint'"),
        ({"state": {"owner": ["not", "a", "name"]}}, "state.owner: "),
    ]
    before = len(harness.client.sessions())
    for fields, message in cases:
        r = _post(server, "painter", **fields)
        assert r.status_code == 400, (fields, r.text)
        assert r.json()["message"].startswith(message), r.json()
    assert len(harness.client.sessions()) == before
    # A thread with a session: its next message is refused the same way, nothing stored.
    thread = f"t-{uuid.uuid4()}"
    first = _post(server, "painter", threadId=thread)
    assert first.status_code == 200, first.text
    token = first.headers["x-dbos-agents-token"]
    sid = session_of(server, "painter", thread)
    harness.client.wait(sid, timeout=60)
    stored, state = len(harness.client.history(sid)), harness.client.state(sid)
    messages = [{"id": "u1", "role": "user", "content": "hi"}]
    messages.append({"id": "u2", "role": "user", "content": "again"})
    fields, message = cases[0]
    r = _post(server, "painter", token, threadId=thread, messages=messages, **fields)
    assert r.status_code == 400, (fields, r.text)
    assert r.json()["message"].startswith(message), r.json()
    assert len(harness.client.history(sid)) == stored
    assert harness.client.state(sid) == state


def test_frontend_tools_option() -> None:
    assert Agent("a", frontend_tools=True).allows_frontend_tool("x")
    assert not Agent("a").allows_frontend_tool("x")
    listed = Agent("a", frontend_tools=["pick_color"])
    assert listed.allows_frontend_tool("pick_color") and not listed.allows_frontend_tool("x")
    with pytest.raises(DefinitionError, match="frontend_tools: paint are the agent's own"):
        Agent("a", tools=[paint], frontend_tools=["paint", "pick_color"])
    with pytest.raises(DefinitionError, match="frontend_tools must be True, False or a list"):
        Agent("a", frontend_tools="pick_color")
