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

from fastapi import HTTPException

from ..delivery import ApprovalDelivery, Delivery, ErrorDelivery
from ..errors import DbosAgentsError, InvalidRequestError
from ..records import SubmitOutcome
from .auth import Access, Operation
from .context import ServerContext

__all__ = ["Answer", "Answers", "Delivered", "Move", "Rerun", "Say", "deliver", "submit"]

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


@dataclass
class Delivered:
    """What submitting a move's answers did."""

    outcomes: list[SubmitOutcome] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    """To report in the stream: an unknown call id, a result the schema refuses."""

    @property
    def reached(self) -> bool:
        """Some answer reached (or had reached) its wait."""
        return any(o.status != "unknown_tool_call" for o in self.outcomes)

    @property
    def accepted(self) -> bool:
        """Some answer was new: the run goes on (else a re-post: nothing changed)."""
        return any(o.status == "accepted" for o in self.outcomes)


async def submit(
    ctx: ServerContext,
    access: Access,
    session_id: str,
    answers: list[Answer],
    who: str | None,
    *,
    strict: bool = False,
) -> Delivered:
    """Submit each answer as the submit route would. ``who``: the approver recorded with
    each decision; ``strict``: an answer the session refuses (a result its schema refuses)
    raises, so the request is refused before its response starts, instead of being
    reported as a problem."""
    client = ctx.acting(access)
    done = Delivered()
    for a in answers:
        delivery = a.delivery
        if isinstance(delivery, ApprovalDelivery):
            delivery = delivery.model_copy(update={"decided_by": who})
        try:
            outcome = await client.deliver(session_id, a.tool_call_id, delivery)
        except InvalidRequestError as exc:
            ctx.metrics.submits.labels(a.kind, exc.code).inc()
            if strict:
                raise
            done.problems.append(f"tool call {a.tool_call_id!r}: {exc}")
            continue
        except DbosAgentsError as exc:
            ctx.metrics.submits.labels(a.kind, exc.code).inc()
            raise
        ctx.metrics.submits.labels(a.kind, outcome.status).inc()
        done.outcomes.append(outcome)
        if outcome.status == "unknown_tool_call":
            done.problems.append(
                f"no open wait for tool call {a.tool_call_id!r} in this chat"
                f" ({outcome.reason}); nothing was changed"
            )
    return done


async def deliver(
    ctx: ServerContext, access: Access, session_id: str, answers: list[Answer], who: str | None
) -> tuple[bool, list[str]]:
    """Submit each answer (``submit``); returns whether any reached (or had reached) its
    wait, and the problems to report in the stream."""
    done = await submit(ctx, access, session_id, answers, who)
    return done.reached, done.problems


NO_APPROVER = (
    "approvals need an approver signed in through the authenticate hook (or"
    " DBOS_AGENTS_SERVER_TOKENS_MAY_APPROVE=true, to let a session token approve)"
)
"""The 403 of every route that takes an approval from a caller who may not approve."""


def approver(ctx: ServerContext, acting: Access) -> str:
    """Who decides an approval (recorded with it). Approving is an authority of its own: a
    session token lets the chat's user answer client tools, not approve calls gated on
    someone's judgment; without a principal from the hook (or ``tokens_may_approve``): 403,
    before anything is submitted."""
    if acting.principal is None and not ctx.settings.tokens_may_approve:
        raise HTTPException(403, NO_APPROVER)
    return acting.principal.subject if acting.principal is not None else acting.via
