"""A run's wait as an MCP form elicitation, and the answer to it as a ``Delivery``.

A client tool asks for its result: the form is the tool's output schema when that is an
object of primitive fields (what a form may hold), else one ``result`` field that takes
the result as JSON text (``wrapped``). An approval asks ``{approved: boolean, reason?:
string}``. Accepting submits the result or the decision; declining or cancelling submits
an error the model reads (client tool) or a denial (approval).
"""

from __future__ import annotations

import json
from typing import Any

import mcp_types as types

from ...delivery import ApprovalDelivery, Delivery, ErrorDelivery, ResultDelivery
from ...messages import JSONValue
from ...records import PendingCall
from .state import Asked

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {
            "type": "boolean",
            "title": "Approve",
            "description": "true runs the call; false denies it",
        },
        "reason": {"type": "string", "title": "Reason", "description": "Why (optional)"},
    },
    "required": ["approved"],
}

_COMMON = {"type", "title", "description", "default"}
_ALLOWED_KEYS = {
    "string": _COMMON | {"minLength", "maxLength", "format", "enum", "enumNames"},
    "number": _COMMON | {"minimum", "maximum"},
    "integer": _COMMON | {"minimum", "maximum"},
    "boolean": _COMMON,
}
_FORMATS = {"date", "date-time", "email", "uri"}


def _primitive(prop: object) -> bool:
    """A field a form may hold (the spec's ``PrimitiveSchemaDefinition``)."""
    if not isinstance(prop, dict):
        return False
    kind = prop.get("type")
    if not isinstance(kind, str) or kind not in _ALLOWED_KEYS or set(prop) - _ALLOWED_KEYS[kind]:
        return False
    if "format" in prop and prop["format"] not in _FORMATS:
        return False
    enum = prop.get("enum")
    return enum is None or (isinstance(enum, list) and all(isinstance(e, str) for e in enum))


def form_schema(output_schema: dict[str, JSONValue] | None) -> tuple[dict[str, Any], bool]:
    """The requested schema for a client tool's result, and whether it is wrapped."""
    schema = output_schema or {}
    props = schema.get("properties")
    if (
        schema.get("type") == "object"
        and isinstance(props, dict)
        and props
        and all(_primitive(p) for p in props.values())
    ):
        required = schema.get("required")
        flat: dict[str, Any] = {"type": "object", "properties": props}
        if isinstance(required, list):
            flat["required"] = required
        return flat, False
    hint = json.dumps(schema, separators=(",", ":"))[:2000] if schema else "any JSON value"
    wrapped = {
        "type": "object",
        "properties": {
            "result": {
                "type": "string",
                "title": "Result (JSON)",
                "description": f"The result as JSON, matching: {hint}",
            }
        },
        "required": ["result"],
    }
    return wrapped, True


def ask(
    wait: PendingCall, agent: str, problem: str | None = None
) -> tuple[types.ElicitRequest, Asked]:
    """The elicitation for ``wait``, and what to remember to read its answer."""
    args = json.dumps(wait.arguments, separators=(",", ":"))[:2000]
    before = f"The previous answer was refused: {problem}. " if problem else ""
    if wait.kind == "approval":
        message = f"{before}The {agent} agent wants to call {wait.tool}({args}). Approve it?"
        schema, wrapped = APPROVAL_SCHEMA, False
    else:
        message = f"{before}The {agent} agent calls the tool {wait.tool}({args}): give its result."
        schema, wrapped = form_schema(wait.output_schema)
    request = types.ElicitRequest(
        params=types.ElicitRequestFormParams(message=message, requested_schema=schema)
    )
    return request, Asked(call=wait.tool_call_id, kind=wait.kind, wrapped=wrapped)


class Unreadable(ValueError):
    """An answer that does not fit its form; the question is asked again, with why."""


def delivery(asked: Asked, answer: object, decided_by: str | None) -> Delivery:
    """What to submit for the client's answer to ``asked``; ``Unreadable`` otherwise."""
    if not isinstance(answer, types.ElicitResult):
        raise Unreadable("the answer is not an elicitation result")
    content: dict[str, JSONValue] = {
        k: (list[JSONValue](v) if isinstance(v, list) else v)
        for k, v in (answer.content or {}).items()
        if v is not None
    }
    if asked.kind == "approval":
        if answer.action != "accept":
            return ApprovalDelivery(
                approved=False, reason=f"{answer.action}d in the MCP client", decided_by=decided_by
            )
        approved, reason = content.get("approved"), content.get("reason")
        if not isinstance(approved, bool):
            raise Unreadable("approved must be true or false")
        if reason is not None and not isinstance(reason, str):
            raise Unreadable("reason must be a string")
        return ApprovalDelivery(approved=approved, reason=reason, decided_by=decided_by)
    if answer.action == "decline":
        return ErrorDelivery(error="the user declined to give this tool's result")
    if answer.action == "cancel":
        return ErrorDelivery(error="the user dismissed the question without an answer")
    if not asked.wrapped:
        return ResultDelivery(result=content)
    text = content.get("result")
    if not isinstance(text, str):
        raise Unreadable("result must be a string of JSON")
    try:
        value: JSONValue = json.loads(text)
    except ValueError:
        value = text  # plain text for a string result
    return ResultDelivery(result=value)
