"""What a reader holds after ``live.reducer``'s operations, replayed the way every encoder
replays them, with the checks each encoder relies on (a text part opened before its
pieces, a step ended after its text, nothing after the end, no call started twice)."""

from __future__ import annotations

from dataclasses import dataclass, field

from dbos_agents.live import operations as op


@dataclass
class Held:
    """What a reader holds after the operations (the way every encoder replays them)."""

    steps: list[str] = field(default_factory=list)
    """Each step's text as shown now."""
    tools: dict[str, str] = field(default_factory=dict)
    """Started tool calls' input as shown now, by call id."""
    calls: dict[str, op.ToolCall] = field(default_factory=dict)
    approvals: list[op.Approval] = field(default_factory=list)
    results: list[op.Op] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    end: op.End | None = None
    open_text: int | None = None


def held(ops: list[op.Op]) -> Held:
    h = Held()
    for o in ops:
        assert h.end is None, f"{o} after the end"
        match o:
            case op.StepStart():
                assert h.open_text is None
                h.steps.append("")
            case op.StepEnd():
                assert h.open_text is None, "a step ends after its text"
            case op.TextStart(part=n):
                assert h.open_text is None
                h.open_text = n
            case op.TextPiece(part=n, text=t):
                assert h.open_text == n
                h.steps[-1] += t
            case op.TextEnd(part=n):
                assert h.open_text == n
                h.open_text = None
            case op.Reset():
                h.steps[-1], h.open_text = "", None
                h.tools = {}
            case op.ToolStart(call_id=cid):
                assert cid not in h.tools, f"{cid} started twice"
                h.tools[cid] = ""
            case op.ToolArgs(call_id=cid, delta=d):
                h.tools[cid] += d
            case op.ToolCall(call_id=cid):
                assert cid in h.tools, "a call's input comes after its start"
                h.calls[cid] = o
            case op.Approval():
                h.approvals.append(o)
            case op.ToolOutput() | op.ToolFailed() | op.ToolDenied():
                h.results.append(o)
            case op.Progress(event=e):
                h.notes.append(e.note_id)
            case op.End():
                assert h.open_text is None
                h.end = o
    return h
