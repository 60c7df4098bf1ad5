"""dbos-agents: LLM agents whose every step survives a crash, on DBOS and Postgres."""

from .agent import Agent
from .client import AgentClient
from .client_tools import ClientTool, client_tool
from .errors import (
    AccessDeniedError,
    ConfigurationError,
    DatabaseUnavailableError,
    DbosAgentsError,
    DefinitionError,
    InterruptFailedError,
    InvalidRequestError,
    InvalidResultError,
    ModelError,
    NotRootSessionError,
    RuntimeNotLaunchedError,
    SessionBusyError,
    SessionNotFoundError,
    TransientModelError,
    UnknownAgentError,
)
from .messages import Message, ModelResponse, ToolCall, Usage
from .outcome import RunOutcome, SessionInfo
from .records import HistoryEntry, InterruptOutcome, PendingCall, SubmitOutcome, ToolCallRecord
from .results import ToolError, ToolResult
from .runtime import AgentRuntime, SessionHandle
from .scoped import ScopedClient
from .settings import Settings
from .tools import Tool, ToolContext, tool

__all__ = [
    # definitions
    "Agent",
    "ClientTool",
    "client_tool",
    "Tool",
    "ToolContext",
    "tool",
    # runtime
    "AgentClient",
    "AgentRuntime",
    "ScopedClient",
    "SessionHandle",
    "Settings",
    # data
    "HistoryEntry",
    "InterruptOutcome",
    "PendingCall",
    "SubmitOutcome",
    "Message",
    "ModelResponse",
    "RunOutcome",
    "SessionInfo",
    "ToolCall",
    "ToolCallRecord",
    "ToolError",
    "ToolResult",
    "Usage",
    # errors
    "AccessDeniedError",
    "ConfigurationError",
    "DatabaseUnavailableError",
    "DbosAgentsError",
    "DefinitionError",
    "InterruptFailedError",
    "InvalidRequestError",
    "InvalidResultError",
    "ModelError",
    "NotRootSessionError",
    "RuntimeNotLaunchedError",
    "SessionBusyError",
    "SessionNotFoundError",
    "TransientModelError",
    "UnknownAgentError",
]
