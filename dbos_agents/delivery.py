"""What a submit delivers to a waiting workflow: one typed model end to end.

The client builds a ``Delivery``, the submit path validates and stores it and sends it with
``DBOSClient.send_in_transaction``, the workflow's wait decodes it, and the HTTP server
maps its request bodies onto it. One discriminated union, one name per kind:

- ``result``: a client tool's output (validated against the tool's output schema)
- ``error``: a client tool failed; the model reads the sentence (either wait kind accepts it)
- ``approval``: a human approved or denied an approval-gated call
- ``interrupt``: the session was interrupted; the wait ends the run
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from .messages import JSONValue

WaitKind = Literal["client", "approval"]
"""What a pending call waits for: a client-tool result or an approval decision."""


class _Base(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ResultDelivery(_Base):
    kind: Literal["result"] = "result"
    result: JSONValue


class ErrorDelivery(_Base):
    kind: Literal["error"] = "error"
    error: str


class ApprovalDelivery(_Base):
    kind: Literal["approval"] = "approval"
    approved: bool
    reason: str | None = None
    decided_by: str | None = None
    """Who approved or denied: the HTTP server sets the authenticated subject."""


class InterruptDelivery(_Base):
    kind: Literal["interrupt"] = "interrupt"


Delivery = Annotated[
    ResultDelivery | ErrorDelivery | ApprovalDelivery | InterruptDelivery,
    Field(discriminator="kind"),
]
_ADAPTER: TypeAdapter[Delivery] = TypeAdapter(Delivery)


def answers(delivery: Delivery) -> WaitKind | None:
    """The wait kind this delivery answers; ``None`` when it answers either (error,
    interrupt)."""
    if isinstance(delivery, ResultDelivery):
        return "client"
    if isinstance(delivery, ApprovalDelivery):
        return "approval"
    return None


def encode(delivery: Delivery) -> dict[str, Any]:
    """The JSON sent to the workflow and stored on the pending row."""
    return delivery.model_dump(mode="json")


def decode(payload: object) -> Delivery:
    """Read what a wait received. Anything unreadable becomes an ``ErrorDelivery`` the model
    sees, never an exception in the workflow."""
    try:
        return _ADAPTER.validate_python(payload)
    except ValidationError:
        return ErrorDelivery(error=f"unreadable submission: {payload!r:.200}")
