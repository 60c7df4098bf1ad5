"""The parts (chunks) of the AI SDK's UI message stream that the server sends, as typed
models; ``wire()`` is the JSON of one ``data:`` line (camelCase, unset fields left out, as
``uiMessageChunkSchema`` in ``ai`` 7 reads them)."""

from __future__ import annotations

import json
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, JsonValue
from pydantic.alias_generators import to_camel

FinishReason = Literal["stop", "length", "tool-calls", "error", "other"]


class Chunk(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)
    keep: ClassVar[tuple[str, ...]] = ()
    """Fields sent even when None (a tool's input or output may be JSON null)."""

    def wire(self) -> str:
        data = self.model_dump(mode="json", by_alias=True, exclude_none=True)
        for name in self.keep:
            data[to_camel(name)] = getattr(self, name)
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


class Start(Chunk):
    type: Literal["start"] = "start"
    message_id: str | None = None


class StartStep(Chunk):
    type: Literal["start-step"] = "start-step"


class FinishStep(Chunk):
    type: Literal["finish-step"] = "finish-step"


class ResetStep(Chunk):
    """Removes every part of the current step at the client (``ai`` >= 7)."""

    type: Literal["reset-step"] = "reset-step"


class TextStart(Chunk):
    type: Literal["text-start"] = "text-start"
    id: str


class TextDelta(Chunk):
    type: Literal["text-delta"] = "text-delta"
    id: str
    delta: str


class TextEnd(Chunk):
    type: Literal["text-end"] = "text-end"
    id: str


class ToolInputStart(Chunk):
    type: Literal["tool-input-start"] = "tool-input-start"
    tool_call_id: str
    tool_name: str


class ToolInputDelta(Chunk):
    type: Literal["tool-input-delta"] = "tool-input-delta"
    tool_call_id: str
    input_text_delta: str


class ToolInputAvailable(Chunk):
    keep = ("input",)
    type: Literal["tool-input-available"] = "tool-input-available"
    tool_call_id: str
    tool_name: str
    input: JsonValue
    provider_executed: bool | None = None
    """True for the server's own tools: the page's ``onToolCall`` is not called for them
    and ``lastAssistantMessageIsCompleteWithToolCalls`` does not wait for them."""


class ToolApprovalRequest(Chunk):
    type: Literal["tool-approval-request"] = "tool-approval-request"
    approval_id: str
    tool_call_id: str


class ToolOutputAvailable(Chunk):
    keep = ("output",)
    type: Literal["tool-output-available"] = "tool-output-available"
    tool_call_id: str
    output: JsonValue


class ToolOutputError(Chunk):
    type: Literal["tool-output-error"] = "tool-output-error"
    tool_call_id: str
    error_text: str


class ToolOutputDenied(Chunk):
    type: Literal["tool-output-denied"] = "tool-output-denied"
    tool_call_id: str


class ErrorPart(Chunk):
    type: Literal["error"] = "error"
    error_text: str


class SessionPart(Chunk):
    """``data-session`` (transient: never stored in the message): the new chat's session
    token, for the page to send as ``Authorization: Bearer`` from then on."""

    keep = ("data",)
    type: Literal["data-session"] = "data-session"
    data: dict[str, str]
    transient: bool = True


class ProgressPart(Chunk):
    """``data-progress``: a running tool's note (``ProgressEvent``), kept in the message.
    ``id`` is ``<toolCallId>-<part>``: a note sent again (a replay, the stream after an
    answer) replaces itself at the page instead of adding a copy."""

    keep = ("data",)
    type: Literal["data-progress"] = "data-progress"
    id: str
    data: dict[str, JsonValue]


class Finish(Chunk):
    type: Literal["finish"] = "finish"
    finish_reason: FinishReason | None = None


Part = (
    Start
    | StartStep
    | FinishStep
    | ResetStep
    | TextStart
    | TextDelta
    | TextEnd
    | ToolInputStart
    | ToolInputDelta
    | ToolInputAvailable
    | ToolApprovalRequest
    | ToolOutputAvailable
    | ToolOutputError
    | ToolOutputDenied
    | ErrorPart
    | SessionPart
    | ProgressPart
    | Finish
)
