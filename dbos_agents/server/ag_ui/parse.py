"""Reading a ``RunAgentInput`` (the ``ag_ui.core`` model) and the parts of it a session uses.

A body that is not a ``RunAgentInput`` is ``INVALID_REQUEST`` naming the field (the wire
name, ``messages[0].content``), as every route of the server answers a malformed body.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ag_ui.core import RunAgentInput, TextPart, ToolMessage
from pydantic import ValidationError

from ...delivery import ApprovalDelivery, Delivery, ErrorDelivery, ResultDelivery
from ...errors import InvalidRequestError
from ...messages import JSONValue

__all__ = ["approval_of", "field_name", "parse_input", "result_of", "text_of"]


def field_name(loc: Sequence[int | str]) -> str:
    """``("messages", 0, "user", "content")`` as ``messages[0].user.content``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "body"


def parse_input(raw: bytes) -> RunAgentInput:
    """The body as a ``RunAgentInput``; ``InvalidRequestError`` naming the first bad field."""
    try:
        data = json.loads(raw)
    except ValueError:
        raise InvalidRequestError("body: not JSON (a RunAgentInput is a JSON object)") from None
    if not isinstance(data, dict):
        raise InvalidRequestError("body: a RunAgentInput is a JSON object")
    try:
        return RunAgentInput.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise InvalidRequestError(f"{field_name(first['loc'])}: {first['msg']}{more}") from None


def text_of(content: object, field: str) -> str:
    """A message's text: a string, or text parts only (media parts are not supported)."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for i, part in enumerate(content if isinstance(content, list) else []):
        if not isinstance(part, TextPart):
            raise InvalidRequestError(f"{field}[{i}]: only text parts are supported")
        texts.append(part.text)
    return "".join(texts)


def result_of(message: ToolMessage, field: str) -> Delivery:
    """A frontend tool's answer: ``error`` set is a failure the model reads; otherwise the
    content is the tool's output as JSON text (validated against the client tool's output
    schema at submit). Text that is not JSON is submitted as a string (and refused there
    unless the schema accepts one)."""
    if message.error is not None:
        return ErrorDelivery(error=message.error)
    text = text_of(message.content, f"{field}.content")
    try:
        value: JSONValue = json.loads(text)
    except ValueError:
        value = text
    return ResultDelivery(result=value)


def approval_of(payload: object, field: str) -> ApprovalDelivery:
    """An approval decision: ``{"approved": bool, "reason"?: str}`` or a bare boolean."""
    if isinstance(payload, bool):
        return ApprovalDelivery(approved=payload)
    if not isinstance(payload, dict) or not isinstance(payload.get("approved"), bool):
        raise InvalidRequestError(
            f'{field}: an approval is {{"approved": true|false, "reason"?: string}}'
        )
    reason = payload.get("reason")
    if reason is not None and not isinstance(reason, str):
        raise InvalidRequestError(f"{field}.reason: a string")
    return ApprovalDelivery(approved=payload["approved"], reason=reason)


def approval_text(message: ToolMessage, field: str) -> ApprovalDelivery:
    """An approval answered with a tool message: its content is the decision as JSON."""
    text = text_of(message.content, f"{field}.content")
    try:
        payload = json.loads(text)
    except ValueError:
        payload = None
    return approval_of(payload, f"{field}.content")
