"""The app the browser tests run in a worker subprocess (``tests.browser.app:runtime``).

- ``asker``: calls the client tool ``confirm`` (10 minutes), then reports the result.
- ``impatient``: calls ``confirm_fast`` (1 second), so a call times out.
- ``closer``: calls ``close_account``, which needs a human's approval.
- ``boss``: delegates to ``middle``, which delegates to ``leaf``, which calls ``confirm``
  (a wait two sub-agents deep).
"""

from __future__ import annotations

from datetime import timedelta

from dbos_agents import Agent, AgentRuntime, ModelResponse
from dbos_agents.models import ModelRequest, ScriptedModel, call, calls
from tests.http.app import close_account, confirm, confirm_fast  # the same tools


def _last(request: ModelRequest, role: str) -> str:
    return next((m.content or "" for m in reversed(request.messages) if m.role == role), "")


def respond(request: ModelRequest) -> str | ModelResponse:
    first = request.messages[-1].role == "user"
    agent = request.agent
    if not first:
        return f"{agent} got: {_last(request, 'tool')}"
    if agent in ("asker", "leaf"):
        return calls(call("confirm", {"question": _last(request, "user")}))
    if agent == "impatient":
        return calls(call("confirm_fast", {"question": "quick?"}))
    if agent == "closer":
        return calls(call("close_account", {"account_id": _last(request, "user")}))
    if agent in ("boss", "middle"):
        child = "subagent__middle" if agent == "boss" else "subagent__leaf"
        return calls(call(child, {"message": _last(request, "user")}))
    raise AssertionError(f"no script for {agent}")


def runtime() -> AgentRuntime:
    agents = [
        Agent("asker", "asks the user", tools=[confirm], tool_timeout=timedelta(minutes=10)),
        Agent("impatient", "asks, briefly", tools=[confirm_fast]),
        Agent("closer", "closes accounts", tools=[close_account]),
        Agent(
            "boss",
            "delegates",
            sub_agents=[
                Agent(
                    "middle",
                    "delegates again",
                    sub_agents=[Agent("leaf", tools=[confirm], tool_timeout=timedelta(minutes=10))],
                )
            ],
        ),
    ]
    return AgentRuntime(agents, ScriptedModel(respond=respond))
