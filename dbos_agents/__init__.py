"""dbos-agents: LLM agents whose every step survives a crash, on DBOS and Postgres.

Definitions (``Agent``, ``tool``, ``client_tool``, messages, results, errors) import without
``dbos`` or ``sqlalchemy``; the clients, the runtime and ``Settings`` load on first use
(``__getattr__`` below), so a module that only defines agents stays light.
"""

from typing import TYPE_CHECKING

from .agent import Agent
from .client_tools import ClientTool, client_tool
from .errors import (
    AccessDeniedError,
    AgentUnavailableError,
    AskTimeoutError,
    ConfigurationError,
    DatabaseUnavailableError,
    DbosAgentsError,
    DefinitionError,
    DurableToolError,
    InterruptFailedError,
    InvalidRequestError,
    InvalidResultError,
    MCPServerError,
    ModelError,
    NondeterministicToolError,
    NotJSONError,
    NotRootSessionError,
    RuntimeNotLaunchedError,
    SessionBusyError,
    SessionNotFoundError,
    StateValidationError,
    StepFailedError,
    StepOutcomeUnknownError,
    TransientModelError,
    TurnNotFoundError,
    UnknownAgentError,
    UnsupportedDBOSError,
)
from .events import (
    Cursor,
    DeltaEvent,
    MessageEvent,
    PendingEvent,
    ProgressEvent,
    RetractEvent,
    SessionEvent,
    ToolCallPiece,
)
from .messages import Message, ModelResponse, ToolCall, Usage
from .outcome import RunOutcome, SessionInfo
from .records import (
    HistoryEntry,
    InterruptOutcome,
    PendingCall,
    QueuedRuns,
    SessionEvents,
    StatusEvent,
    SubmitOutcome,
    TimelineEvent,
    ToolCallRecord,
    TurnUsage,
)
from .results import ToolError, ToolResult
from .tool_context import APPROVAL, Decision, StepInfo
from .tools import Tool, ToolContext, tool

if TYPE_CHECKING:
    from .client import AgentClient, AsyncAgentClient, Scope
    from .settings import Settings
    from .worker import AgentRuntime, SessionHandle

_LAZY = {
    "AgentClient": "client",
    "AgentRuntime": "worker",
    "AsyncAgentClient": "client",
    "Scope": "client",
    "SessionHandle": "worker",
    "Settings": "settings",
}
"""Exports that pull in dbos, sqlalchemy or pydantic-settings: loaded on first access."""

__all__ = [
    # definitions
    "Agent",
    "ClientTool",
    "client_tool",
    "Tool",
    "ToolContext",
    "tool",
    "APPROVAL",
    "Decision",
    "StepInfo",
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
    "ProgressEvent",
    "RetractEvent",
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
    "ConfigurationError",
    "DatabaseUnavailableError",
    "DbosAgentsError",
    "DefinitionError",
    "DurableToolError",
    "AskTimeoutError",
    "InterruptFailedError",
    "InvalidRequestError",
    "InvalidResultError",
    "MCPServerError",
    "ModelError",
    "NondeterministicToolError",
    "NotJSONError",
    "NotRootSessionError",
    "RuntimeNotLaunchedError",
    "SessionBusyError",
    "SessionNotFoundError",
    "StateValidationError",
    "StepFailedError",
    "StepOutcomeUnknownError",
    "TransientModelError",
    "TurnNotFoundError",
    "UnknownAgentError",
    "UnsupportedDBOSError",
]


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
