"""What a posted AI SDK chat asks the session to do (a ``moves.Move``), read from its
last message.

The page posts the whole chat every time; the durable session already has everything but
the newest move, which is in the last message:

- a user message: ``say`` its text (a new chat's first run, or a follow-up);
- the assistant message, after the page ran a client tool (``addToolOutput``: a tool part
  in ``output-available`` or ``output-error``) or a human answered an approval
  (``addToolApprovalResponse``: ``approval-responded``): submit each answer of its last
  step, as ``POST /sessions/{id}/submit-tool-result`` would. Re-posting an answer is
  harmless (``already_completed``); server tools' outputs (``providerExecuted``) are the
  server's own and are not sent back.
"""

from __future__ import annotations

from ...delivery import ApprovalDelivery, Delivery, ErrorDelivery, ResultDelivery
from ...errors import InvalidRequestError
from ..moves import Answer, Answers, Say
from .request import ChatRequest, UIMessage, UIPart

__all__ = ["plan"]


def plan(body: ChatRequest) -> Say | Answers:
    """The move the request makes; ``INVALID_REQUEST`` naming the field when there is none."""
    if body.trigger == "regenerate-message":
        raise InvalidRequestError(
            "trigger: regenerate-message is not supported (a session's transcript is durable;"
            " send a new message instead)"
        )
    last = len(body.messages) - 1
    message = body.messages[last]
    where = f"messages[{last}]"
    if message.role == "user":
        text = "".join(p.text or "" for p in message.parts if p.type == "text")
        if not text.strip():
            raise InvalidRequestError(f"{where}.parts: the user message has no text part")
        return Say(text)
    if message.role == "assistant":
        answers = _answers(message, where)
        if answers:
            return Answers(answers)
    raise InvalidRequestError(
        f"{where}: the last message is neither a user message nor an assistant message with"
        " a tool output or an approval response to send"
    )


def _answers(message: UIMessage, where: str) -> list[Answer]:
    start = max((i for i, p in enumerate(message.parts) if p.type == "step-start"), default=-1)
    out: list[Answer] = []
    for j in range(start + 1, len(message.parts)):
        part = message.parts[j]
        at = f"{where}.parts[{j}]"
        if not part.is_tool:
            continue
        answer = _answer_of(part, at)
        if answer is None:
            continue
        if not part.tool_call_id:
            raise InvalidRequestError(f"{at}.toolCallId: a tool part needs its call id")
        # An approval answers its approval id: the call's own, or the wait a durable
        # tool opened mid-call (``{call id}.ask{n}``).
        approval_id = part.approval.id if part.approval is not None else None
        approval = isinstance(answer, ApprovalDelivery)
        wait_id = approval_id if approval and approval_id else part.tool_call_id
        out.append(Answer(wait_id, answer))
    return out


def _answer_of(part: UIPart, at: str) -> Delivery | None:
    state = part.state
    if state == "approval-responded":
        a = part.approval
        if a is None or a.approved is None:
            raise InvalidRequestError(f"{at}.approval.approved: an answered approval needs it")
        return ApprovalDelivery(approved=a.approved, reason=a.reason)
    if part.provider_executed:
        return None  # the server ran it: its output came from here
    if state == "output-available":
        return ResultDelivery(result=part.output)
    if state == "output-error":
        return ErrorDelivery(error=part.error_text or "the tool failed")
    return None
