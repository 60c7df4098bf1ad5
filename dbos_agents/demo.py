"""``dbos-agents demo``: the first run, on the embedded Postgres by default.

A support session runs in a real worker subprocess that is armed to SIGKILL itself right
after the refund's handler ran (before its checkpoint). A fresh worker resumes the session;
the refund tool's ``verify`` hook finds the refund at the provider, so it is not paid twice.
The customer's confirmation (a client tool) is answered through ``AgentClient``.
"""

from __future__ import annotations

import shlex
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from .client import AgentClient
from .examples.support_desk import PAYMENTS_ENV, FakePayments
from .models.guard import block_real_models
from .outcome import TERMINAL
from .records import HistoryEntry
from .settings import Settings
from .testing.crash import CrashHarness, WorkerProcess

APP = "dbos_agents.examples.support_desk:runtime"


def next_steps(session_id: str, url: str, url_flag: str = "") -> list[tuple[str, str]]:
    """(command, comment) pairs the demo prints; each runs as printed (a test does so).
    ``url_flag`` is `` --database-url URL`` when the demo was given one explicitly."""
    return [
        (f"dbos-agents sessions{url_flag}", "sessions, newest first"),
        (f"dbos-agents show {session_id}{url_flag}", "its transcript and tool-call ledger"),
        (f"dbos-agents follow {session_id}{url_flag}", "its events (live while it runs)"),
        (f"dbos-agents worker --app {APP}{url_flag}", "in another terminal; Ctrl-C drains it"),
        (
            f"dbos-agents start support {shlex.quote('My grinder arrived broken, order A-43.')}"
            f" --app {APP}{url_flag}",
            "a new session for that worker",
        ),
        (f"dbos-agents pending{url_flag}", "the confirmation it waits for; answer with submit"),
        (
            f"dbos-agents serve --allow-unauthenticated{url_flag}",
            "the HTTP API on 127.0.0.1:8000, no auth: local use only",
        ),
        (f"psql {shlex.quote(url)} -c 'select * from dbos_agents.tool_calls'", "the ledger"),
    ]


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


def _drive(
    console: Console,
    client: AgentClient,
    sid: str,
    worker: WorkerProcess,
    doing: str,
    timeout: float = 120,
) -> bool:
    """Answer the customer's confirmations until the run ends; False if the worker died."""
    deadline = time.monotonic() + timeout
    with console.status(escape(doing), spinner="dots"):
        while time.monotonic() < deadline:
            for p in client.pending(session_id=sid):
                console.print(f"  customer confirms [bold]{escape(str(p.arguments))}[/] -> yes")
                client.submit_tool_result(sid, p.tool_call_id, result={"confirmed": True})
            if worker.popen.poll() is not None:
                return False
            if client.session(sid).status in TERMINAL:
                return True
            time.sleep(0.1)
    raise TimeoutError(f"the demo session did not finish in {timeout}s")


def demo(
    url: str, settings: Settings, *, console: Console | None = None, url_flag: str = ""
) -> dict[str, Any]:
    """Run the demo, narrating on ``console``; returns a summary (``demo --json``)."""
    console = console or Console()
    block_real_models()  # the demo never spends money by accident (its workers inherit it)
    data = Path(settings.data_dir)
    payments = data / "demo-payments.jsonl"
    payments.unlink(missing_ok=True)
    with console.status("creating the schemas (migrations)", spinner="dots"):
        harness = CrashHarness(
            APP,
            url,
            env={PAYMENTS_ENV: str(payments.resolve())},
            executor_id="demo-worker",
            log_dir=data / "logs",
        )
    with harness:
        client = harness.client
        console.rule("1. a worker that will be SIGKILLed right after the refund handler runs")
        worker = harness.start_worker(crash_at="after_handler:2")
        sid = client.start("support", "My espresso machine arrived broken, order A-42.")
        console.print(f"  session {sid} started through AgentClient (enqueued)")
        finished = _drive(
            console, client, sid, worker, "the worker runs the session (armed to die)"
        )
        crashed = not finished
        if crashed:
            console.print(
                f"  [red]worker {worker.pid} died by SIGKILL[/] (exit {worker.popen.returncode})"
                " after issue_refund ran, before its step checkpoint"
            )
            console.rule("2. a fresh worker recovers the session")
            worker = harness.start_worker()
            _drive(console, client, sid, worker, "a fresh worker recovers the session")
        try:
            client.send(sid, "Thanks!")
            _drive(console, client, sid, worker, "the customer says thanks")
        finally:
            worker.stop()
        console.print(_render(client.history(sid)))
        ledger = Table(title="tool-call ledger (dbos_agents.tool_calls)")
        for col in ("tool call", "tool", "status", "attempts", "idempotency key"):
            ledger.add_column(col)
        for c in client.tool_calls(sid):
            ledger.add_row(c.tool_call_id, c.tool, c.status, str(c.attempts), c.idempotency_key)
        console.print(ledger)
        info = client.session(sid)
        refunds = FakePayments(payments).refunds()
        console.print(
            Panel.fit(
                f"session [bold]{sid}[/] -> {info.status}, {info.turns} model turns, "
                f"{info.usage.total_tokens} tokens\n"
                f"refunds at the provider: [bold]{len(refunds)}[/] (at most once, across a crash)\n"
                f"data: Postgres at {escape(url)}\n"
                "  schema dbos_agents: sessions, messages, tool_calls, pending_calls, usage\n"
                "  schema dbos: DBOS workflows and step checkpoints\n"
                f"  worker logs: {escape(str(data / 'logs'))}",
                title="dbos-agents demo",
            )
        )
        steps = next_steps(sid, url, url_flag)
        console.print("Next steps (from this directory; they use the same database):")
        width = min(56, max(len(cmd) for cmd, _ in steps))
        for cmd, comment in steps:
            console.print(f"  {cmd.ljust(width)}  # {comment}", markup=False, soft_wrap=True)
        return {
            "session_id": sid,
            "status": info.status,
            "turns": info.turns,
            "total_tokens": info.usage.total_tokens,
            "crashed_and_recovered": crashed,
            "refunds": len(refunds),
            "database_url": url,
            "worker_logs": str(data / "logs"),
            "next_steps": [cmd for cmd, _ in steps],
        }
