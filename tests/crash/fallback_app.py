"""The app of tests/crash/test_fallback_crash.py: an agent whose primary model is always
overloaded and whose fallback answers; both record each call in the witness file."""

from __future__ import annotations

import os

from dbos_agents import Agent, AgentRuntime, ModelResponse, TransientModelError
from dbos_agents.models import FallbackModel, ModelRequest, ScriptedModel
from dbos_agents.testing import Witness


class Overloaded:
    name = "primary"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        Witness().record("model", name="primary", pid=os.getpid())
        raise TransientModelError("529 overloaded")


def _backup_called(request: ModelRequest) -> None:
    Witness().record("model", name="backup", pid=os.getpid())


def runtime() -> AgentRuntime:
    backup = ScriptedModel(["the backup answered"], name="backup", on_call=_backup_called)
    return AgentRuntime([Agent("resilient", model=FallbackModel(Overloaded(), backup))])
