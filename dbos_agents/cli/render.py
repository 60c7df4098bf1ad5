"""How sessions look in a terminal: one renderer for ``show``, ``follow`` and ``sessions``."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..events import PendingEvent
from ..outcome import SessionInfo
from ..records import HistoryEntry, PendingCall, ToolCallRecord

STATUS_STYLE = {
    "queued": "yellow",
    "running": "yellow",
    "completed": "green",
    "failed": "red",
    "interrupted": "magenta",
    "max_turns": "dark_orange",
    "budget_exhausted": "dark_orange",
}
ROLE_STYLE = {"user": "bold cyan", "assistant": "bold green", "tool": "magenta", "system": "dim"}
CLIP = 400


def status_text(status: str) -> Text:
    return Text(status, style=STATUS_STYLE.get(status, ""))


def ago(when: datetime, now: datetime | None = None) -> str:
    """``42s ago``, ``5m ago``, ``3h ago``, ``2d ago``: enough to scan a list."""
    seconds = max(0, int(((now or datetime.now(UTC)) - when).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"


def _clip(text: str, full: bool) -> str:
    return text if full or len(text) <= CLIP else text[:CLIP] + f"… ({len(text)} chars)"


def message(m: HistoryEntry, *, full: bool = False) -> Text:
    """One transcript message: who, then what (tool calls as ``-> name(args) [id]``)."""
    line = Text()
    if m.role == "tool":
        line.append(f"  <- {m.name or 'tool'} ", style=ROLE_STYLE["tool"])
        line.append(f"[{m.tool_call_id}] ", style="dim")
        line.append(_clip(m.content or "", full))
        return line
    line.append(f"{m.role} > ", style=ROLE_STYLE.get(m.role, ""))
    text = m.content or ""
    line.append(text if m.role == "system" else _clip(text, full), style=_dim(m.role))
    for i, c in enumerate(m.tool_calls):
        line.append("\n  -> " if text or i else "-> ", style="bold")
        line.append(c.name, style="bold")
        line.append(f"({_clip(c.arguments, full)}) ")
        line.append(f"[{c.id}]", style="dim")
    return line


def tool_calls(m: HistoryEntry, *, full: bool = False) -> Text:
    """Only a message's tool calls (its text was already shown as it streamed)."""
    line = Text()
    for i, c in enumerate(m.tool_calls):
        line.append("\n  -> " if i else "  -> ", style="bold")
        line.append(c.name, style="bold")
        line.append(f"({_clip(c.arguments, full)}) ")
        line.append(f"[{c.id}]", style="dim")
    return line


def _dim(role: str) -> str:
    return "dim" if role == "system" else ""


def run_header(run_seq: int) -> Text:
    return Text(f"-- run {run_seq} --", style="dim")


def transcript(entries: list[HistoryEntry], *, full: bool = False) -> RenderableType:
    """Messages in order, with a rule-like header where each run (user message) begins."""
    parts: list[RenderableType] = []
    run = None
    for m in entries:
        if m.run_seq != run:
            run = m.run_seq
            parts.append(run_header(run))
        parts.append(message(m, full=full))
    return Group(*parts) if parts else Text("(no messages yet)", style="dim")


def session_panel(info: SessionInfo) -> Panel:
    lines = Text()
    lines.append(f"{info.agent}  ", style="bold")
    lines.append_text(status_text(info.status))
    lines.append(
        f"  run {info.run_seq}, {info.turns} turns, {info.usage.total_tokens} tokens"
        f" (${info.usage.cost_usd:.4f})"
    )
    who = ", ".join(
        f"{k} {v}" for k, v in (("user", info.user_id), ("tenant", info.tenant_id)) if v
    )
    if who:
        lines.append(f"\n{who}")
    if info.parent_session_id:
        lines.append(f"\nsub-agent of {info.parent_session_id} (root {info.root_session_id})")
    lines.append(
        f"\ncreated {info.created_at.isoformat(timespec='seconds')},"
        f" updated {ago(info.updated_at)}",
        style="dim",
    )
    if info.final_output:
        lines.append("\noutput: ", style="bold")
        lines.append(info.final_output)
    if info.error:
        lines.append("\nerror: ", style="bold red")
        lines.append(info.error)
    return Panel(lines, title=f"session {info.id}", title_align="left", expand=False)


def ledger(calls: list[ToolCallRecord]) -> Table:
    table = Table(title="tool calls", title_justify="left")
    for col in ("tool call", "tool", "kind", "status", "attempts", "run.turn"):
        table.add_column(col)
    for c in calls:
        table.add_row(
            c.tool_call_id,
            c.tool,
            c.kind,
            status_text(c.status),
            str(c.attempts),
            f"{c.run_seq}.{c.turn}",
        )
    return table


def waiting(p: PendingCall | PendingEvent) -> Text:
    """A pending call and the command that answers it."""
    answer = "--approve (or --deny)" if p.kind == "approval" else "--result '<json>'"
    line = Text("waiting for ", style="yellow")
    line.append(f"{p.kind} {p.tool}", style="bold yellow")
    line.append(f"({_clip(json.dumps(p.arguments), False)}) [{p.tool_call_id}]\n")
    line.append(
        f"  answer: dbos-agents submit {p.root_session_id} {p.tool_call_id} {answer}", style="dim"
    )
    return line


def sessions_table(rows: list[SessionInfo]) -> Table:
    """Optional columns (user, tenant, parent) only when some row has a value."""
    table = Table(
        title=f"{len(rows)} session(s), newest first",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    optional = {
        "user": [r.user_id or "" for r in rows],
        "tenant": [r.tenant_id or "" for r in rows],
        "parent": [r.parent_session_id or "" for r in rows],
    }
    shown = [name for name, values in optional.items() if any(values)]
    for col in ("session", "agent", "status", "turns", "updated", *shown):
        table.add_column(col, no_wrap=col in ("session", "status", "updated"))
    for i, r in enumerate(rows):
        table.add_row(
            r.id,
            r.agent,
            status_text(r.status),
            str(r.turns),
            ago(r.updated_at),
            *(optional[name][i] for name in shown),
        )
    return table


def final_status(status: str, error: str | None, output: str | None) -> Text:
    line = Text("run ended: ")
    line.append_text(status_text(status))
    if error:
        line.append(f" ({error})", style="red")
    elif output and status != "completed":
        line.append(f" ({output})")
    return line


def until(when: datetime, now: datetime | None = None) -> str:
    """``in 5m`` for a future time, ``3m ago`` for a past one."""
    now = now or datetime.now(UTC)
    return ago(when, now) if when <= now else "in " + ago(now, when).removesuffix(" ago")


def pending_table(rows: list[PendingCall]) -> Table:
    """Ids never wrap (they are copied into ``submit``); the owner only for sub-agents."""
    table = Table(
        title=f"{len(rows)} pending call(s)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    subs = any(r.owner_session_id != r.root_session_id for r in rows)
    cols = ("root session", "tool call", "kind", "tool", "status", "deadline")
    for col in (*cols, "owner") if subs else cols:
        table.add_column(col, no_wrap=col in ("root session", "tool call", "owner"))
    for r in rows:
        cells = [r.root_session_id, r.tool_call_id, r.kind, r.tool, r.status, until(r.deadline)]
        table.add_row(*cells, *([r.owner_session_id] if subs else []))
    return table
