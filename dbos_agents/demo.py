"""``dbos-agents demo``: the first run. A support session on the embedded Postgres."""

from __future__ import annotations

import asyncio

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from .runtime import AgentRuntime
from .settings import Settings
from .store.queries import HistoryEntry

console = Console()


def _render(entries: list[HistoryEntry]) -> Table:
    table = Table(title="transcript", show_lines=True)
    table.add_column("#", justify="right")
    table.add_column("role")
    table.add_column("content")
    for m in entries:
        text = m.content or ""
        if m.tool_calls:
            text += "\n" + "\n".join(f"-> {c.name}({c.arguments}) [{c.id}]" for c in m.tool_calls)
        if m.role == "tool":
            text = f"{m.name} [{m.tool_call_id}]: {text}"
        table.add_row(str(m.seq), m.role, escape(text.strip()))
    return table


async def run_demo(url: str, settings: Settings) -> None:
    from .examples.support_desk import runtime as build

    rt: AgentRuntime = build()
    rt.settings = settings.model_copy(update={"database_url": url, "executor_id": "demo"})
    await rt.launch()
    try:
        handle = await rt.start("support", "My espresso machine arrived broken, order A-42.")
        outcome = await handle.result()
        follow = await rt.send(handle.session_id, "Thanks!")
        await follow.result()
        console.print(_render(await handle.history()))
        ledger = Table(title="tool-call ledger")
        for col in ("tool call", "tool", "status", "attempts", "idempotency key"):
            ledger.add_column(col)
        for c in await handle.tool_calls():
            ledger.add_row(c.tool_call_id, c.tool, c.status, str(c.attempts), c.idempotency_key)
        console.print(ledger)
        info = await handle.status()
        console.print(
            Panel.fit(
                f"session [bold]{handle.session_id}[/] -> {outcome.status}, "
                f"{info.turns} model turns, {info.usage.total_tokens} tokens\n"
                f"data: Postgres at {url}\n"
                "  schema dbos_agents: sessions, messages, tool_calls, usage\n"
                "  schema dbos: DBOS workflows and step checkpoints\n"
                "next:\n"
                "  dbos-agents worker --app dbos_agents.examples.support_desk:runtime\n"
                "  python -m pytest            # the test suite\n"
                f"  psql '{url}' -c 'select * from dbos_agents.tool_calls'",
                title="dbos-agents demo",
            )
        )
    finally:
        await rt.shutdown()


def demo(url: str, settings: Settings) -> None:
    asyncio.run(run_demo(url, settings))
