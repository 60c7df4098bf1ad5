"""Tool results: what the model reads back after a tool call, success or failure.

Failures the model can reason about are values, never exceptions, so a bad argument or a
crashed side effect never fails the workflow or triggers a step retry.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel

from . import storable
from .messages import JSONValue

ToolErrorKind = Literal[
    "tool-error",
    "invalid-arguments",
    "unknown-tool",
    "tool-durability-error",
    "client_tool_timeout",
    "client-error",
    "approval-denied",
    "subagent-failed",
    "interrupted",
    "tool-timeout",
]


class ToolError(BaseModel):
    """A failed tool call as the model sees it."""

    kind: ToolErrorKind
    tool: str
    tool_call_id: str
    message: str
    details: JSONValue = None


class ToolResult(BaseModel):
    """The outcome of one tool call. Exactly one of ``output`` / ``error`` is meaningful."""

    tool_call_id: str
    tool: str
    ok: bool
    output: JSONValue = None
    error: ToolError | None = None
    verified: bool = False
    """True when the output came from the tool's ``verify`` hook after a crash."""

    @classmethod
    def success(
        cls, tool_call_id: str, tool: str, output: JSONValue, *, verified: bool = False
    ) -> ToolResult:
        # Repaired here, where every kind of tool's output enters: a NUL or a NaN in it
        # must not fail the write of the result after the side effect happened.
        return cls(
            tool_call_id=tool_call_id,
            tool=tool,
            ok=True,
            output=storable.value(output),
            verified=verified,
        )

    @classmethod
    def failure(
        cls,
        tool_call_id: str,
        tool: str,
        kind: ToolErrorKind,
        message: str,
        details: JSONValue = None,
    ) -> ToolResult:
        error = ToolError(
            kind=kind,
            tool=tool,
            tool_call_id=tool_call_id,
            message=storable.text(message),
            details=storable.value(details),
        )
        return cls(tool_call_id=tool_call_id, tool=tool, ok=False, error=error)

    def content(self) -> str:
        """The tool message text the model receives."""
        if self.ok:
            return self.output if isinstance(self.output, str) else _dumps(self.output)
        assert self.error is not None
        return _dumps({"error": self.error.model_dump(mode="json", exclude_none=True)})


def durability_error(tool_call_id: str, tool: str, reason: str | None = None) -> ToolResult:
    """The result recorded when a side-effecting call's outcome is unknown after a crash."""
    message = (
        f"The worker stopped while tool {tool!r} (call {tool_call_id}) was running, so it is "
        "unknown whether its side effect happened. It was not run again, to avoid doing it "
        "twice. Check the effect (for example by reading the resource) before retrying, or "
        "tell the user the outcome is uncertain."
    )
    if reason:
        message += f" ({reason})"
    return ToolResult.failure(tool_call_id, tool, "tool-durability-error", message)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
