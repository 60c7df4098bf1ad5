"""Section 2 of bench/submit_latency.py: N sessions waiting at once, then a submit to every
one of them. Failures are counted and tabulated, not fatal."""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import sqlalchemy as sa
from _lib.asker import AGENT
from _lib.db import rows
from _lib.labels import PRIMARY, SUBMIT_CALL, TOOL_MSG
from _lib.procfs import CpuMeter
from _lib.timing import finish_times, timed_submit, tool_message_times
from submit_report import Metrics, Phase, Snapshot

from dbos_agents.client import AgentClient

BULK_POLL_SEC = 0.05
SUBMIT_THREADS = 8
ARM_TIMEOUT_SEC = 300.0


def wait_states(engine: sa.Engine, sids: Sequence[str]) -> dict[str, tuple[str, bool]]:
    """session id -> (DBOS workflow status, pending row waiting and workflow armed in recv).

    A session's first run is the workflow named by the session id."""
    sql = (
        "SELECT w.workflow_uuid, w.status,"
        " EXISTS (SELECT 1 FROM dbos.operation_outputs o"
        "   WHERE o.workflow_uuid = w.workflow_uuid AND o.function_name = 'DBOS.sleep')"
        " AND EXISTS (SELECT 1 FROM dbos_agents.pending_calls p"
        "   WHERE p.root_session_id = w.workflow_uuid AND p.status = 'waiting') AS armed"
        " FROM dbos.workflow_status w WHERE w.workflow_uuid = ANY(:s)"
    )
    return {r.workflow_uuid: (r.status, bool(r.armed)) for r in rows(engine, sql, s=list(sids))}


def open_calls(engine: sa.Engine, sids: Sequence[str]) -> list[tuple[str, str]]:
    sql = (
        "SELECT root_session_id, tool_call_id FROM dbos_agents.pending_calls"
        " WHERE root_session_id = ANY(:s) AND status = 'waiting'"
    )
    return [(r.root_session_id, r.tool_call_id) for r in rows(engine, sql, s=list(sids))]


class ErrorLog(logging.Filter):
    """Counts the exceptions DBOS logs for failed workflows (and keeps their tracebacks
    off the console, so the tables stay readable)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            frames = traceback.extract_tb(exc.__traceback__)
            ours = [f for f in frames if "dbos_agents" in f.filename]
            where = (
                f" [in {ours[-1].name}, {ours[-1].filename.split('dbos_agents/')[-1]}:{ours[-1].lineno}]"
                if ours
                else ""
            )
            if any(f.filename.endswith("dbos/_datasource.py") for f in frames):
                where += " [DBOS datasource transaction]"
            self.counts[f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}{where}"] += 1
            return False
        return True


@dataclass
class Concurrent:
    snaps: list[Snapshot]
    metrics: Metrics
    phases: list[Phase]
    problems: list[str]


async def arm(
    client: AgentClient, pool: ThreadPoolExecutor, n: int, wave: int, out: Concurrent
) -> tuple[list[str], set[str]]:
    """Start n sessions in waves of ``wave`` (0 = all at once), each wave armed before the
    next; returns (every session id, the armed ones)."""
    loop = asyncio.get_running_loop()
    failed: dict[str, str] = {}
    cpu = CpuMeter()
    sids: list[str] = []
    armed: set[str] = set()
    step = wave or n
    for lo in range(0, n, step):
        batch = list(
            await asyncio.gather(
                *(
                    loop.run_in_executor(pool, client.start, AGENT, f"bulk {i}")
                    for i in range(lo, min(n, lo + step))
                )
            )
        )
        sids += batch
        deadline = time.monotonic() + ARM_TIMEOUT_SEC
        todo = set(batch)
        while todo:
            await asyncio.sleep(0.25)
            for sid, (status, ok) in (
                await asyncio.to_thread(wait_states, client.engine, list(todo))
            ).items():
                if ok and status == "PENDING":
                    armed.add(sid)
                    todo.discard(sid)
                elif status not in ("PENDING", "ENQUEUED"):
                    failed[sid] = status
                    todo.discard(sid)
            if todo and time.monotonic() > deadline:
                out.problems.append(
                    f"{len(todo)} sessions not armed {ARM_TIMEOUT_SEC:.0f}s after their start"
                )
                break
    how = f"in waves of {wave}" if wave and wave < n else "all at once"
    out.phases.append((f"start {n} ({how}) -> {len(armed)} armed in recv", *cpu.read()))
    if failed:
        out.problems.append(
            f"{len(failed)} of {n} sessions failed before reaching recv"
            f" (DBOS status {sorted(set(failed.values()))})"
        )
    return sids, armed


async def concurrent(client: AgentClient, n: int, wave: int, baseline: Snapshot) -> Concurrent:
    """Start n sessions, let them all wait, then submit to every one from SUBMIT_THREADS
    threads."""
    out = Concurrent(
        [baseline, Snapshot.take("before the burst (after sections 1+3)")], Metrics(), [], []
    )
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(SUBMIT_THREADS, thread_name_prefix="bench-submit") as pool:
        sids, armed = await arm(client, pool, n, wave, out)
        out.snaps.append(Snapshot.take(f"{len(armed)} sessions waiting"))
        idle = CpuMeter()
        await asyncio.sleep(5.0)
        out.phases.append((f"{len(armed)} waiting, idle 5 s", *idle.read()))
        out.snaps.append(Snapshot.take(f"{len(armed)} sessions waiting, +5 s idle"))

        calls_ = [
            c for c in await asyncio.to_thread(open_calls, client.engine, sids) if c[0] in armed
        ]
        submitted: dict[str, tuple[float, float]] = {}
        submit_errors: Counter[str] = Counter()

        async def submit_one(sid: str, tcid: str) -> None:
            try:
                submitted[sid] = await loop.run_in_executor(pool, timed_submit, client, sid, tcid)
            except Exception as exc:
                submit_errors[f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"] += 1

        cpu = CpuMeter()
        submits = asyncio.gather(*(submit_one(sid, tcid) for sid, tcid in calls_))
        finished: dict[str, float] = {}
        ended_badly: dict[str, str] = {}
        deadline = time.monotonic() + ARM_TIMEOUT_SEC
        left = [sid for sid, _ in calls_]
        while left:
            await asyncio.sleep(BULK_POLL_SEC)
            for wf, (status, fin) in (
                await asyncio.to_thread(finish_times, client.engine, left)
            ).items():
                if fin is not None:
                    if status == "SUCCESS":
                        finished[wf] = fin
                    else:
                        ended_badly[wf] = status
            left = [s for s in left if s not in finished and s not in ended_badly]
            if submits.done() and submit_errors:
                left = [s for s in left if s in submitted]
            if left and time.monotonic() > deadline:
                out.problems.append(
                    f"{len(left)} sessions still running {ARM_TIMEOUT_SEC:.0f}s after the submits"
                )
                break
        drain = cpu.read()
        await submits
        if submit_errors:
            out.problems += [f"submit failed x{c}: {e}" for e, c in submit_errors.items()]
        if ended_badly:
            out.problems.append(
                f"{len(ended_badly)} of {len(calls_)} sessions ended badly after their submit"
                f" (DBOS status {sorted(set(ended_badly.values()))})"
            )
        if submitted:
            first = min(t0 for t0, _ in submitted.values())
            out.phases.append(
                (
                    f"all {len(submitted)} submits returned (first t0 -> last return)",
                    max(t0 + d / 1000 for t0, d in submitted.values()) - first,
                    None,
                    None,
                )
            )
            if finished:
                out.phases.append(
                    (
                        f"drain: first submit -> last of {len(finished)} runs finished",
                        max(finished.values()) / 1000 - first,
                        None,
                        None,
                    )
                )
        out.phases.append((f"drain as seen by the {BULK_POLL_SEC * 1000:.0f} ms poller", *drain))
    out.snaps.append(Snapshot.take("after drain"))
    tool_ms = await asyncio.to_thread(tool_message_times, client.engine, list(finished))
    for sid, fin in finished.items():
        t0 = submitted[sid][0]
        out.metrics.add(PRIMARY, fin - t0 * 1000)
        out.metrics.add(TOOL_MSG, tool_ms[sid] - t0 * 1000)
    for _, dur in submitted.values():
        out.metrics.add(SUBMIT_CALL, dur)
    return out
