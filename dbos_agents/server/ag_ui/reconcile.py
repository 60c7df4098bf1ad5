"""What a posted ``RunAgentInput`` asks of the durable session (a ``moves.Move``, the type
the AI SDK's adapter reads its requests into too).

An AG-UI client posts the whole thread on every run; the session already holds most of it.
Only the tail can be new:

- ``resume`` entries answer the approval interrupts of the previous run (interrupt id =
  tool call id): ``resolved`` with ``{"approved": bool, "reason"?}``, ``cancelled`` denies;
- trailing ``tool`` messages answer frontend tool calls the session waits on (a tool
  message for an approval wait is a decision too, its content the same JSON);
- a last ``user`` message is new when the thread has more user messages than the session
  has runs (each run starts with one): it is sent (a new run);
- anything else asks for nothing new: the session's current run is streamed again from its
  start (a rerun after a lost stream or a crash).

An answer for a tool call the session does not wait on (nor answered in its current run)
is ``unknown``: nothing is submitted and the run reports ``RUN_ERROR``.
"""

from __future__ import annotations

from ag_ui.core import RunAgentInput, ToolMessage, UserMessage

from ...delivery import ApprovalDelivery
from ...records import HistoryEntry, PendingCall
from ..auth import Operation
from ..moves import Answer, Answers
from .parse import approval_of, approval_text, result_of, text_of
from .view import MINTED

__all__ = ["answers_of", "new_message", "operation_of"]

CANCELLED = "cancelled by the user"
"""The reason stored with an approval whose interrupt the client cancelled."""


def _trailing_tools(body: RunAgentInput) -> list[tuple[int, ToolMessage]]:
    out: list[tuple[int, ToolMessage]] = []
    for i in range(len(body.messages) - 1, -1, -1):
        m = body.messages[i]
        if not isinstance(m, ToolMessage):
            break
        out.insert(0, (i, m))
    return out


def operation_of(body: RunAgentInput) -> Operation:
    """What the request does, for the ``authenticate`` hook (and the token check)."""
    if body.resume:
        return "decide_approval"
    if _trailing_tools(body):
        return "submit_result"
    if body.messages and isinstance(body.messages[-1], UserMessage):
        return "send_message"
    return "read_events"


def new_message(body: RunAgentInput, runs: int) -> str | None:
    """The text of the last message when it is a new user message (see the module doc);
    ``runs``: how many runs the session has had (0: a new thread)."""
    if not body.messages or not isinstance(body.messages[-1], UserMessage):
        return None
    users = sum(isinstance(m, UserMessage) for m in body.messages)
    if users <= runs:
        return None
    last = len(body.messages) - 1
    return text_of(body.messages[last].content, f"messages[{last}].content")


def answers_of(
    body: RunAgentInput, run_seq: int, history: list[HistoryEntry], waits: list[PendingCall]
) -> Answers:
    """The answers the request carries, checked against the session's open ``waits`` and
    the tool results its current run (``run_seq``) already has."""
    answered = {h.tool_call_id for h in history if h.role == "tool" and h.run_seq == run_seq}
    open_waits = {w.tool_call_id: w for w in waits}
    out = Answers()
    for i, entry in enumerate(body.resume or []):
        call_id = entry.interrupt_id
        if call_id in answered:
            continue
        wait = open_waits.get(call_id)
        if wait is None or wait.kind != "approval":
            out.unknown.append(call_id)
        elif entry.status == "cancelled":
            out.submit.append(Answer(call_id, ApprovalDelivery(approved=False, reason=CANCELLED)))
        else:
            out.submit.append(Answer(call_id, approval_of(entry.payload, f"resume[{i}].payload")))
    for i, message in _trailing_tools(body):
        call_id = message.tool_call_id
        if call_id in answered or message.id.startswith(MINTED):
            continue  # answered already, or a server tool's result the server sent
        wait = open_waits.get(call_id)
        if wait is None:
            out.unknown.append(call_id)
        elif wait.kind == "approval":
            out.submit.append(Answer(call_id, approval_text(message, f"messages[{i}]")))
        else:
            out.submit.append(Answer(call_id, result_of(message, f"messages[{i}]")))
    return out
