"""``dbos-agents demo``: the first run, on the embedded Postgres by default.

A support session runs in a real worker subprocess that is armed to SIGKILL itself right
after the refund's handler ran (before its checkpoint). A fresh worker resumes the session;
the refund tool's ``verify`` hook finds the refund at the provider, so it is not paid twice.
The customer's confirmation (a client tool) is answered through ``AgentClient``.

It claims only what it saw (``verdict``): the worker died at the crash point, the provider
has exactly one refund, every run completed, and only the demo's workers ran the session.
Otherwise it fails with the reason (``DEMO_FAILED``): above all another worker on the
same database (the one its own next steps start), which would take the session and leave
nothing to show. It always runs its scripted model: its workers get no OpenAI key.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from . import _dbos
from .client import AgentClient
from .errors import DbosAgentsError
from .examples.support_desk import PAYMENTS_ENV, FakePayments
from .models.guard import block_real_models
from .outcome import TERMINAL
from .records import HistoryEntry
from .settings import Settings
from .store.schema import SCHEMA
from .testing.crash import CrashHarness, WorkerProcess

APP = "dbos_agents.examples.support_desk:runtime"
DEMO_EXECUTOR = "demo-worker"
MODEL_ENV = ("OPENAI_API_KEY", "OPENAI_BASE_URL")
"""What makes the example pick ``OpenAIModel``; blanked for the demo's workers."""


class DemoFailedError(DbosAgentsError):
    """The demo could not show what it claims; the message says why and what to do."""

    code = "DEMO_FAILED"


@dataclass(frozen=True)
class Peer:
    """A live worker on the demo's database that is not the demo's."""

    executor_id: str
    hostname: str
    pid: int
    heartbeat_age_sec: float


@dataclass(frozen=True)
class Shown:
    """What the demo saw, checked by ``verdict`` before it claims anything."""

    crash_exit: int | None
    """The armed worker's exit status (``-SIGKILL`` at the crash point; None: alive)."""
    status: str
    error: str | None
    refunds: int
    """Refunds the provider recorded (the payments file only the demo's workers write)."""
    executors: list[str]
    """The executor ids that ran the session's workflows."""
    others: list[Peer]
    log_tail: str
    """The end of the last worker's log, for a worker that died otherwise."""


def verdict(shown: Shown) -> str | None:
    """Why what the demo saw does not show its claims, the likeliest cause first; None
    when it does (a crash, one refund, a completed session, run by the demo alone)."""
    if shown.others:
        return another_worker(shown.others)
    foreign = [e for e in shown.executors if e != DEMO_EXECUTOR]
    if foreign:
        return (
            f"another worker ({', '.join(foreign)}) ran the demo's session: stop every other"
            " worker on this database (Ctrl-C in its terminal) and run the demo again, or give"
            " the demo a database of its own (--database-url)"
        )
    if shown.crash_exit not in (None, -signal.SIGKILL):
        return (
            f"the demo's worker exited with status {shown.crash_exit} before its crash point;"
            f" its log ends: {shown.log_tail}"
        )
    if shown.status not in TERMINAL:
        return (
            f"the demo's session is still {shown.status}: its worker stopped; its log ends:"
            f" {shown.log_tail}"
        )
    if shown.status != "completed":
        return f"the demo's session ended {shown.status}: {shown.error or 'no error recorded'}"
    if shown.crash_exit is None:
        return "the demo's worker finished the session without reaching its crash point"
    if shown.refunds != 1:
        what = "it ran elsewhere" if shown.refunds == 0 else "it was paid twice: a bug"
        return f"the provider recorded {shown.refunds} refunds, not 1 ({what})"
    return None


def another_worker(others: list[Peer]) -> str:
    here = socket.gethostname()
    names = "; ".join(
        f"{p.executor_id} (pid {p.pid} on {'this host' if p.hostname == here else p.hostname},"
        f" heartbeat {p.heartbeat_age_sec:.0f}s ago)"
        for p in others
    )
    pids = " ".join(str(p.pid) for p in others if p.hostname == here)
    kill = f", or `kill {pids}`" if pids else ""
    return (
        f"another worker is running on this database: {names}. It would take the demo's"
        " session from the demo's worker, leaving no crash to show. Stop it (Ctrl-C in its"
        f" terminal{kill}) and run the demo again, or give the demo a database of its own"
        " (--database-url)"
    )


def live_peers(engine: sa.Engine, settings: Settings) -> list[Peer]:
    """Other workers whose heartbeat moves: a recent one by the database's clock, then a
    new beat within one interval (a worker killed a moment ago has a recent one too)."""
    interval = settings.heartbeat_interval_sec
    sql = sa.text(
        f"SELECT executor_id, hostname, pid, beat,"
        " EXTRACT(EPOCH FROM now() - heartbeat_at) AS age FROM"
        f" {SCHEMA}.workers WHERE status = 'running' AND executor_id <> :me"
        " AND heartbeat_at > now() - make_interval(secs => :window)"
    )
    args = {"me": DEMO_EXECUTOR, "window": 2 * interval + 1}
    with engine.connect() as conn:
        first = {r.executor_id: r for r in conn.execute(sql, args)}
    live: dict[str, Peer] = {}
    deadline = time.monotonic() + 1.5 * interval + 1
    while first.keys() - live.keys() and time.monotonic() < deadline:
        time.sleep(0.25)
        with engine.connect() as conn:
            for r in conn.execute(sql, args):
                seen = first.get(r.executor_id)
                if seen is not None and r.beat != seen.beat:
                    live[r.executor_id] = Peer(r.executor_id, r.hostname, r.pid, float(r.age))
    return sorted(live.values(), key=lambda p: p.executor_id)


def _executors(client: AgentClient, sid: str) -> list[str]:
    """Who ran the session's workflows (its runs and sub-agents), by DBOS's own record."""
    ws = _dbos.quoted(client.settings.dbos_system_schema) + ".workflow_status"
    sql = sa.text(
        f"SELECT DISTINCT executor_id FROM {ws} WHERE executor_id IS NOT NULL"
        " AND (workflow_uuid = :s OR starts_with(workflow_uuid, :p))"
    )
    with client.engine.connect() as conn:
        return sorted(r.executor_id for r in conn.execute(sql, {"s": sid, "p": f"{sid}::"}))


def _observe(
    client: AgentClient, sid: str, armed: WorkerProcess, last: WorkerProcess, payments: Path
) -> Shown:
    info = client.session(sid)
    lines = [x.strip() for x in last.log().splitlines() if x.strip()]
    return Shown(
        crash_exit=armed.popen.poll(),
        status=info.status,
        error=info.error,
        refunds=len(FakePayments(payments).refunds()),
        executors=_executors(client, sid),
        others=[],
        log_tail=" | ".join(lines[-3:])[-400:] or "(empty)",
    )


def _check(shown: Shown) -> None:
    why = verdict(shown)
    if why is not None:
        raise DemoFailedError(why)


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
) -> None:
    """Answer the customer's confirmations until the run ends or the worker dies."""
    deadline = time.monotonic() + timeout
    with console.status(escape(doing), spinner="dots"):
        while time.monotonic() < deadline:
            for p in client.pending(session_id=sid):
                console.print(f"  customer confirms [bold]{escape(str(p.arguments))}[/] -> yes")
                client.submit_tool_result(sid, p.tool_call_id, result={"confirmed": True})
            if worker.popen.poll() is not None or client.session(sid).status in TERMINAL:
                return
            time.sleep(0.1)
    raise DemoFailedError(
        f"the demo's session did not end in {timeout:.0f}s; worker log: {worker.log_path}"
    )


def demo(
    url: str, settings: Settings, *, console: Console | None = None, url_flag: str = ""
) -> dict[str, Any]:
    """Run the demo, narrating on ``console``; returns a summary (``demo --json``)."""
    console = console or Console()
    block_real_models()  # the demo never spends money by accident (its workers inherit it)
    model_env = [k for k in MODEL_ENV if os.environ.get(k)]
    if model_env:
        console.print(
            f"[dim]{' and '.join(model_env)} set: the demo runs its scripted model anyway"
            " (nothing is spent); the worker of its next steps uses OpenAIModel[/]"
        )
    data = Path(settings.data_dir)
    payments = data / "demo-payments.jsonl"
    payments.unlink(missing_ok=True)
    with console.status("creating the schemas (migrations)", spinner="dots"):
        harness = CrashHarness(
            APP,
            url,
            env={PAYMENTS_ENV: str(payments.resolve()), **dict.fromkeys(MODEL_ENV, "")},
            executor_id=DEMO_EXECUTOR,
            log_dir=data / "logs",
        )
    with harness:
        client = harness.client
        with console.status("looking for other workers on this database", spinner="dots"):
            others = live_peers(client.engine, settings)
        if others:
            raise DemoFailedError(another_worker(others))
        console.rule("1. a worker that will be SIGKILLed right after the refund handler runs")
        armed = worker = harness.start_worker(crash_at="after_handler:2")
        try:
            sid = client.start("support", "My espresso machine arrived broken, order A-42.")
            console.print(f"  session {sid} started through AgentClient (enqueued)")
            _drive(console, client, sid, armed, "the worker runs the session (armed to die)")
            if armed.popen.poll() == -signal.SIGKILL:
                console.print(
                    f"  [red]worker {armed.pid} died by SIGKILL[/] (exit {armed.popen.returncode})"
                    " after issue_refund ran, before its step checkpoint"
                )
                console.rule("2. a fresh worker recovers the session")
                worker = harness.start_worker()
                _drive(console, client, sid, worker, "a fresh worker recovers the session")
            _check(_observe(client, sid, armed, worker, payments))
            client.send(sid, "Thanks!")
            _drive(console, client, sid, worker, "the customer says thanks")
            _check(_observe(client, sid, armed, worker, payments))
        finally:
            worker.stop()
            armed.stop()
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
            "crashed_and_recovered": True,
            "refunds": len(refunds),
            "database_url": url,
            "worker_logs": str(data / "logs"),
            "next_steps": [cmd for cmd, _ in steps],
        }
