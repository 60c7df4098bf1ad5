"""How sessions look in a terminal: one renderer for ``show``, ``follow`` and ``sessions``."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime

from rich import box
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..events import PendingEvent, ProgressEvent
from ..outcome import SessionInfo
from ..records import HistoryEntry, PendingCall, ToolCallRecord
from . import expected

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


def progress(e: ProgressEvent, *, full: bool = False) -> Text:
    """A running tool's note: ``  .. tool [call] 40% note``."""
    line = Text(f"  .. {e.tool} ", style=ROLE_STYLE["tool"])
    line.append(f"[{e.tool_call_id}] ", style="dim")
    if e.fraction is not None:
        line.append(f"{e.fraction:.0%} ", style="bold")
    line.append(_clip(e.note, full))
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
    """No vertical rules, and names fold rather than end in ``…``: 80 columns hold it."""
    table = Table(title="tool calls", title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
    for col in ("tool call", "tool", "kind", "status", "attempts", "run.turn"):
        table.add_column(col, overflow="fold")
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


def submit_command(p: PendingCall | PendingEvent, database_url: str | None = None) -> str | None:
    """The ``dbos-agents submit`` line that answers ``p``, pasteable as printed (its result
    the example of the tool's schema); None when no example validates."""
    if p.kind == "approval":
        answer = ["--approve"]
    else:
        found = expected.example(p.output_schema or {})
        if found is None:
            return None
        answer = ["--result", json.dumps(found.value)]
    url = ["--database-url", database_url] if database_url else []
    return shlex.join(["dbos-agents", "submit", p.root_session_id, p.tool_call_id, *answer, *url])


def print_wait(
    console: Console,
    p: PendingCall | PendingEvent,
    *,
    database_url: str | None = None,
    full: bool = False,
) -> None:
    """A wait, and what answers it: the tool's arguments, the result it expects (a sketch
    of its schema) and a ``submit`` line. Labelled rows wrap within their column at any
    width; the command is one line the terminal wraps, so it copies whole."""
    status = p.status if isinstance(p, PendingCall) else "waiting"
    open_ = status == "waiting"
    kind = "client tool " if p.kind == "client" else "approval of "
    head = Text(kind, style="yellow" if open_ else "dim")
    head.append(p.tool, style="bold yellow" if open_ else "bold")
    head.append(f"  {status}", style="yellow" if open_ else "")
    if open_:
        head.append(f", deadline {until(p.deadline)}", style="dim")
    rows = Table.grid(padding=(0, 2))
    rows.add_column(style="dim", no_wrap=True)
    rows.add_column(overflow="fold")
    rows.add_row("session", p.root_session_id)
    if isinstance(p, PendingCall) and p.owner_session_id != p.root_session_id:
        rows.add_row("sub-agent", p.owner_session_id)
    rows.add_row("tool call", p.tool_call_id)
    rows.add_row("arguments", _clip(json.dumps(p.arguments), full))
    if p.kind == "client":
        rows.add_row("result", expected.sketch(p.output_schema or {}))
    if isinstance(p, PendingCall) and p.submission is not None:
        rows.add_row("submitted", _clip(json.dumps(p.submission), full))
    console.print(head)
    console.print(Padding(rows, (0, 0, 0, 2), expand=False))
    if not open_:
        return
    command = submit_command(p, database_url)
    if p.kind == "approval":
        console.print(Text("  answer (or --deny --reason WHY):", style="dim"))
    elif command is None:
        console.print(Text("  answer with --result JSON of that shape:", style="dim"))
        command = shlex.join(["dbos-agents", "submit", p.root_session_id, p.tool_call_id])
    else:
        console.print(Text("  answer (an example result that validates; edit it):", style="dim"))
    console.print(f"    {command}", soft_wrap=True, markup=False, highlight=False)


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


def print_pending(
    console: Console, rows: list[PendingCall], *, database_url: str | None = None
) -> None:
    """Each call as a block (``print_wait``): a table of ids, names and JSON shrinks them to
    ``cli… con…`` at 80 columns, and these are what an operator copies."""
    console.print(Text(f"{len(rows)} pending call(s), oldest deadline first", style="bold"))
    for r in rows:
        console.print()
        print_wait(console, r, database_url=database_url)
