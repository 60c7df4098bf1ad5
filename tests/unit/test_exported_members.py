"""The public surface: ``__all__`` is pinned here so additions and removals are deliberate."""

from __future__ import annotations

import importlib
import inspect

import pytest

import dbos_agents
from dbos_agents import errors

EXPECTED_ALL = {
    # definitions
    "Agent",
    "ClientTool",
    "client_tool",
    "Tool",
    "ToolContext",
    "APPROVAL",
    "Decision",
    "StepInfo",
    "tool",
    # runtime
    "AgentClient",
    "AgentRuntime",
    "AsyncAgentClient",
    "Scope",
    "SessionHandle",
    "Settings",
    # data
    "Cursor",
    "DeltaEvent",
    "MessageEvent",
    "PendingEvent",
    "RetractEvent",
    "ProgressEvent",
    "SessionEvent",
    "ToolCallPiece",
    "HistoryEntry",
    "InterruptOutcome",
    "PendingCall",
    "QueuedRuns",
    "SessionEvents",
    "StatusEvent",
    "SubmitOutcome",
    "Message",
    "ModelResponse",
    "RunOutcome",
    "SessionInfo",
    "ToolCall",
    "ToolCallRecord",
    "TurnUsage",
    "TimelineEvent",
    "ToolError",
    "ToolResult",
    "Usage",
    # errors
    "AccessDeniedError",
    "AgentUnavailableError",
    "MCPServerError",
    "ConfigurationError",
    "DatabaseUnavailableError",
    "DbosAgentsError",
    "DefinitionError",
    "DurableToolError",
    "AskTimeoutError",
    "NondeterministicToolError",
    "NotJSONError",
    "StepFailedError",
    "StepOutcomeUnknownError",
    "InterruptFailedError",
    "InvalidRequestError",
    "InvalidResultError",
    "ModelError",
    "NotRootSessionError",
    "RuntimeNotLaunchedError",
    "SessionBusyError",
    "SessionNotFoundError",
    "StateValidationError",
    "TransientModelError",
    "TurnNotFoundError",
    "UnknownAgentError",
    "UnsupportedDBOSError",
}

ERROR_CLASSES = [
    obj
    for _, obj in inspect.getmembers(errors, inspect.isclass)
    if issubclass(obj, BaseException) and obj.__module__ == errors.__name__
]


def test_all_matches_the_expected_set() -> None:
    assert set(dbos_agents.__all__) == EXPECTED_ALL


def test_all_has_no_duplicates() -> None:
    assert len(dbos_agents.__all__) == len(set(dbos_agents.__all__))


@pytest.mark.parametrize("name", sorted(EXPECTED_ALL))
def test_every_exported_name_is_importable(name: str) -> None:
    module = importlib.import_module("dbos_agents")
    assert getattr(module, name) is not None
    namespace: dict[str, object] = {}
    exec(f"from dbos_agents import {name}", namespace)
    assert namespace[name] is getattr(dbos_agents, name)


def test_star_import_yields_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from dbos_agents import *", namespace)
    assert set(namespace) - {"__builtins__"} == EXPECTED_ALL


def test_errors_module_has_the_documented_classes() -> None:
    assert {cls.__name__ for cls in ERROR_CLASSES} == {
        "AccessDeniedError",
        "AgentUnavailableError",
        "MCPServerError",
        "DbosAgentsError",
        "DefinitionError",
        "InterruptFailedError",
        "ConfigurationError",
        "DatabaseUnavailableError",
        "UnknownAgentError",
        "SessionNotFoundError",
        "StateValidationError",
        "SessionBusyError",
        "TurnNotFoundError",
        "RuntimeNotLaunchedError",
        "ModelError",
        "TransientModelError",
        "InvalidRequestError",
        "InvalidResultError",
        "NotRootSessionError",
        "UnsupportedDBOSError",
        "DurableToolError",
        "StepOutcomeUnknownError",
        "StepFailedError",
        "AskTimeoutError",
        "NotJSONError",
        "NondeterministicToolError",
    }


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_subclasses_base_and_has_own_code(cls: type[Exception]) -> None:
    assert issubclass(cls, errors.DbosAgentsError)
    code = cls.__dict__.get("code")
    assert isinstance(code, str)
    assert code.strip()
    assert code == code.upper()


def test_error_codes_are_distinct() -> None:
    codes = [cls.code for cls in ERROR_CLASSES]  # type: ignore[attr-defined]
    assert len(codes) == len(set(codes)), codes


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_every_error_class_is_exported(cls: type[Exception]) -> None:
    assert cls.__name__ in dbos_agents.__all__
    assert getattr(dbos_agents, cls.__name__) is cls


def test_error_hierarchy() -> None:
    assert issubclass(errors.DatabaseUnavailableError, errors.ConfigurationError)
    assert issubclass(errors.UnsupportedDBOSError, errors.ConfigurationError)
    assert issubclass(errors.TransientModelError, errors.ModelError)
    assert issubclass(errors.DefinitionError, ValueError)
    assert issubclass(errors.UnknownAgentError, LookupError)
    assert issubclass(errors.SessionNotFoundError, LookupError)


def test_error_instances_carry_their_fields() -> None:
    busy = errors.SessionBusyError("ses_1", "running")
    assert (busy.session_id, busy.status) == ("ses_1", "running")
    assert str(busy) == "session 'ses_1' is running; wait for it to finish"
    missing = errors.SessionNotFoundError("ses_2")
    assert missing.session_id == "ses_2"
    assert str(missing) == "no session 'ses_2'"
    assert missing.code == "SESSION_NOT_FOUND"


@pytest.mark.parametrize("cls", ERROR_CLASSES, ids=lambda c: c.__name__)
def test_errors_survive_pickling(cls: type[Exception]) -> None:
    """DBOS pickles exceptions raised in steps; a lossy round trip hides the real error."""
    import inspect
    import pickle

    params = [p for p in inspect.signature(cls.__init__).parameters.values() if p.name != "self"]
    samples: dict[str, object] = {"problems": ["p1"], "known": ["a"], "errors": [{"path": "x"}]}
    args = [samples.get(p.name, f"v-{p.name}") for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
    err = cls(*args)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls and str(back) == str(err)
