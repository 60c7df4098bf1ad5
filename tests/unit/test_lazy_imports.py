"""Defining agents needs neither DBOS nor a database driver (pydantic-ai's isolation)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("dbos", "sqlalchemy", "psycopg", "openai", "fastapi", "pydantic_settings")


def _loaded_after(code: str) -> list[str]:
    """Top-level packages of ``HEAVY`` in ``sys.modules`` after ``code``, in a fresh
    interpreter (this test process has imported everything long ago)."""
    probe = (
        f"{code}\nimport sys, json\n"
        f"print(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & {set(HEAVY)!r})))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "code",
    [
        "from dbos_agents import Agent, tool",
        "from dbos_agents import Agent, tool, client_tool, ToolContext, Message, ToolResult",
        "from dbos_agents import DbosAgentsError, SessionInfo, PendingCall, SubmitOutcome",
        "from dbos_agents.models import ScriptedModel",
        "import dbos_agents.models.guard",
    ],
)
def test_definitions_import_without_dbos_or_a_driver(code: str) -> None:
    assert _loaded_after(code) == []


def test_the_probe_sees_heavy_imports() -> None:
    """The check above can fail: a client import does pull DBOS and SQLAlchemy in."""
    assert {"dbos", "sqlalchemy"} <= set(_loaded_after("from dbos_agents import AgentClient"))


def test_lazy_names_resolve_to_their_modules() -> None:
    import dbos_agents
    from dbos_agents.client import AgentClient, AsyncAgentClient
    from dbos_agents.worker import AgentRuntime

    assert dbos_agents.AgentClient is AgentClient
    assert dbos_agents.AsyncAgentClient is AsyncAgentClient
    assert dbos_agents.AgentRuntime is AgentRuntime
    assert set(dbos_agents.__all__) <= set(dir(dbos_agents))
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        dbos_agents.Nope  # noqa: B018


def _ours_after(code: str) -> list[str]:
    probe = (
        f"{code}\nimport sys, json\n"
        "print(json.dumps(sorted(m for m in sys.modules if m.startswith('dbos_agents'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


WORKER_SIDE = ("dbos_agents.runtime", "dbos_agents.loop", "dbos_agents.worker")


@pytest.mark.parametrize(
    "code",
    [
        "import dbos_agents.client",
        "from dbos_agents import AgentClient, AsyncAgentClient, Scope",
        "import dbos_agents.server",
        "from dbos_agents.models import OpenAIModel",
    ],
)
def test_clients_and_adapters_load_no_workflow_or_worker_module(code: str) -> None:
    loaded = _ours_after(code)
    assert [m for m in loaded if m.startswith(WORKER_SIDE)] == []
    assert not [m for m in loaded if m.startswith("dbos_agents.testing")], loaded


def test_the_worker_probe_sees_the_worker() -> None:
    """The check above can fail: the runtime does load the workflow."""
    loaded = _ours_after("from dbos_agents import AgentRuntime")
    assert [m for m in loaded if m.startswith(WORKER_SIDE)] != []
