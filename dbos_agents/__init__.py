"""dbos-agents: LLM agents whose every step survives a crash, on DBOS and Postgres."""

from .agent import Agent
from .errors import (
    ConfigurationError,
    DatabaseUnavailableError,
    DbosAgentsError,
    DefinitionError,
    ModelError,
    RuntimeNotLaunchedError,
    SessionBusyError,
    SessionNotFoundError,
    TransientModelError,
    UnknownAgentError,
)
from .messages import Message, ModelResponse, ToolCall, Usage
from .outcome import RunOutcome, SessionInfo
from .results import ToolError, ToolResult
from .runtime import AgentRuntime, SessionHandle
from .settings import Settings
from .store.queries import HistoryEntry, ToolCallRecord
from .tools import Tool, ToolContext, tool

__all__ = [
    # definitions
    "Agent",
    "Tool",
    "ToolContext",
    "tool",
    # runtime
    "AgentRuntime",
    "SessionHandle",
    "Settings",
    # data
    "HistoryEntry",
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
    "ConfigurationError",
    "DatabaseUnavailableError",
    "DbosAgentsError",
    "DefinitionError",
    "ModelError",
    "RuntimeNotLaunchedError",
    "SessionBusyError",
    "SessionNotFoundError",
    "TransientModelError",
    "UnknownAgentError",
]
