"""A posted chat's move: what a chat UI's request asks of the durable session, whatever
its protocol (the AI SDK's ``ai_sdk/answers.py``, AG-UI's ``ag_ui/reconcile.py`` read it
from their own request bodies).

A chat UI posts the whole conversation; the session holds all of it but the newest move:

- ``Say``: a new user message (a new chat's first run, or a follow-up);
- ``Answers``: answers to waits (a client tool's output or error, an approval's
  decision), each submitted as ``POST /sessions/{id}/submit-tool-result`` would;
  re-posting one is harmless (``already_completed``); ``unknown``: call ids the request
  answers that the session does not wait on (nothing is submitted for them);
- ``Rerun``: nothing new: the run is streamed again from its start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..delivery import ApprovalDelivery, Delivery, ErrorDelivery
from ..errors import DbosAgentsError, InvalidRequestError
from .auth import Access, Operation
from .context import ServerContext

__all__ = ["Answer", "Answers", "Move", "Rerun", "Say", "deliver"]

Kind = Literal["client-tool-result", "client-tool-error", "approval"]
"""The submit route's kinds (its metrics' labels)."""


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Answer:
    tool_call_id: str
    """The wait it answers (a call's id, or a durable tool's ask: ``{call id}.ask{n}``)."""
    delivery: Delivery

    @property
    def kind(self) -> Kind:
        if isinstance(self.delivery, ApprovalDelivery):
            return "approval"
        return (
            "client-tool-error"
            if isinstance(self.delivery, ErrorDelivery)
            else "client-tool-result"
        )

    @property
    def operation(self) -> Operation:
        return "decide_approval" if self.kind == "approval" else "submit_result"


@dataclass
class Answers:
    submit: list[Answer] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)

    @property
    def approvals(self) -> bool:
        return any(a.kind == "approval" for a in self.submit)


@dataclass(frozen=True)
class Rerun:
    pass


Move = Say | Answers | Rerun


async def deliver(
    ctx: ServerContext, access: Access, session_id: str, answers: list[Answer], who: str | None
) -> tuple[bool, list[str]]:
    """Submit each answer; returns whether any reached (or had reached) its wait, and the
    problems to report in the stream (an unknown call id, a result the schema refuses).
    ``who``: the approver recorded with each decision."""
    client = ctx.acting(access)
    reached = False
    problems: list[str] = []
    for a in answers:
        delivery = a.delivery
        if isinstance(delivery, ApprovalDelivery):
            delivery = delivery.model_copy(update={"decided_by": who})
        try:
            outcome = await client.deliver(session_id, a.tool_call_id, delivery)
        except InvalidRequestError as exc:
            ctx.metrics.submits.labels(a.kind, exc.code).inc()
            problems.append(f"tool call {a.tool_call_id!r}: {exc}")
            continue
        except DbosAgentsError as exc:
            ctx.metrics.submits.labels(a.kind, exc.code).inc()
            raise
        ctx.metrics.submits.labels(a.kind, outcome.status).inc()
        if outcome.status == "unknown_tool_call":
            problems.append(
                f"no open wait for tool call {a.tool_call_id!r} in this chat"
                f" ({outcome.reason}); nothing was changed"
            )
        else:
            reached = True
    return reached, problems
