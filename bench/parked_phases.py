"""The phases of bench/parked.py that submit and time: park N sessions, answer fresh waits
at once, sequential submits while the others wait, and the burst (K submits at once from an
API server's thread pool) with what its resumes cost the worker, Postgres and the bench."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from _lib import pyspy
from _lib.asker import AGENT
from _lib.db import connect_retrying
from _lib.procfs import (
    cpu_seconds,
    host_busy_pct,
    host_cpu,
    pg_ports,
    postgres_cpu_seconds,
    proc_status,
)
from _lib.timing import finish_times, timed_submit, tool_message_times, wait_pending_armed
from parked_probe import armed_count, last_armed_ms, status_counts, wal_written

from dbos_agents.client import AgentClient

SETTLE_SEC = 0.1
"""How long a sample sleeps before its first poll (almost every run has finished by then):
a poll competes with the resume it times for the two cores, and the time comes from the
row, not from the poll."""

POLL_SEC = 1.0
"""How often the burst's completion is read. The finish times come from DBOS's rows
(``updated_at``), so this changes no figure; reading often cost Postgres more than the
resumes themselves at 100,000 parked (docs/bench-notes/parked.md)."""


@dataclass
class Burst:
    t_burst: float  # epoch s of the first submit
    submits_end: float  # epoch s when every submit had returned
    submitted: dict[str, float] = field(default_factory=dict)  # session -> t0 (epoch s)
    errors: Counter[str] = field(default_factory=Counter)
    done: dict[str, float] = field(default_factory=dict)  # session -> finished (epoch ms)
    bad: dict[str, str] = field(default_factory=dict)  # session -> DBOS status
    max_threads: int = 0
    max_conns: int = 0
    worker_cpu_s: float = 0.0
    pg_cpu_s: float = 0.0
    self_cpu_s: float = 0.0
    host_pct: float = 0.0
    wal0: tuple[float, int] = (0.0, 0)
    wal1: tuple[float, int] = (0.0, 0)

    @property
    def drain_s(self) -> float:
        return (max(self.done.values()) / 1000 - self.t_burst) if self.done else float("nan")

    @property
    def latency_ms(self) -> list[float]:
        return [self.done[s] - self.submitted[s] * 1000 for s in self.done if s in self.submitted]


def burst(
    client: AgentClient,
    pid: int,
    calls: list[tuple[str, str]],
    threads: int,
    spy_dir: Path | None,
) -> Burst:
    """Submit to every call at once from ``threads`` threads and wait until the runs
    finished; threads and connections of the worker ``pid`` are sampled every 100 ms.
    With ``spy_dir``, py-spy records the worker (GIL holder) into ``burst.txt``."""
    engine: sa.Engine = client.engine
    spy = None
    if spy_dir is not None:
        spy = pyspy.record(pid, spy_dir / "burst.txt", "--gil")
        time.sleep(1.0)
    cpu0, host0 = cpu_seconds(pid), host_cpu()
    pg_cpu0, self_cpu0 = postgres_cpu_seconds(), time.process_time()
    b = Burst(t_burst=0.0, submits_end=0.0, wal0=wal_written(engine))

    def submit_one(pair: tuple[str, str]) -> None:
        try:
            b.submitted[pair[0]] = timed_submit(client, *pair)[0]
        except Exception as exc:
            b.errors[f"{type(exc).__name__}: {str(exc)[:120]}"] += 1

    pool = ThreadPoolExecutor(threads, thread_name_prefix="bench-submit")
    b.t_burst = time.time()
    futures = [pool.submit(submit_one, pair) for pair in calls]
    left = {sid for sid, _ in calls}
    deadline = time.monotonic() + max(300, len(calls) * 0.5)
    submits_end: float | None = None
    next_poll = 0.0
    while left and time.monotonic() < deadline:
        time.sleep(0.1)
        b.max_threads = max(b.max_threads, proc_status(pid)["Threads"])
        b.max_conns = max(b.max_conns, len(pg_ports(pid)))
        if submits_end is None and all(f.done() for f in futures):
            submits_end = time.time()
        if time.monotonic() < next_poll:
            continue
        next_poll = time.monotonic() + POLL_SEC
        for wf, (status, fin) in finish_times(engine, list(left), connect_retrying).items():
            if fin is not None and status == "SUCCESS":
                b.done[wf] = fin
            elif fin is not None:
                b.bad[wf] = status
        left -= set(b.done) | set(b.bad)
        if submits_end is not None:
            left &= set(b.submitted)
    b.worker_cpu_s = cpu_seconds(pid) - cpu0
    b.pg_cpu_s = postgres_cpu_seconds() - pg_cpu0
    b.wal1 = wal_written(engine)
    b.self_cpu_s = time.process_time() - self_cpu0
    b.host_pct = host_busy_pct(host0)
    pool.shutdown(wait=True)
    b.submits_end = submits_end or time.time()
    if spy is not None:
        pyspy.stop(spy)
    return b


def wait_finished(client: AgentClient, wf: str, timeout: float = 60.0) -> float:
    """Sleep ``SETTLE_SEC``, then poll every 5 ms until the run ``wf`` finished; returns
    when it did (epoch ms)."""
    time.sleep(SETTLE_SEC)
    deadline = time.monotonic() + timeout
    while (
        fin := finish_times(client.engine, [wf], connect_retrying).get(wf, ("", None))[1]
    ) is None:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{wf} did not finish within {timeout:.0f}s")
        time.sleep(0.005)
    return fin


def answered_at_once(client: AgentClient, n: int, label: str) -> list[float]:
    """Submit -> run finished (ms) for n fresh sessions, one at a time, each answered as
    soon as its wait is armed: the warm-up, and with parking on the fresh-wait sample
    (within ``park_after_sec`` the wait is still in memory, a browser tool's case, while
    the others stay parked)."""
    out: list[float] = []
    for i in range(n):
        sid = client.start(AGENT, f"{label} {i}")
        call = wait_pending_armed(client, sid, sid)
        t0 = timed_submit(client, sid, call.tool_call_id)[0]
        out.append(wait_finished(client, sid) - t0 * 1000)
    return out


def park(
    client: AgentClient, pid: int, n: int, wave: int, threads: int, log: Callable[[str], None]
) -> tuple[float, float, int, int, list[int], int]:
    """Start n sessions (in waves of ``wave``, each armed before the next; 0 = all at once)
    with the worker ``pid``; returns (park seconds, worker CPU s, armed, failed, threads
    seen, max connections seen)."""
    step = wave or n
    base_armed = armed_count(client.engine)
    cpu0 = cpu_seconds(pid)
    seen_threads: list[int] = []
    seen_conns: list[int] = []
    t_first = time.time()
    last_progress = time.monotonic()
    armed = base_armed
    failed = 0
    with ThreadPoolExecutor(threads, thread_name_prefix="bench-start") as pool:
        for lo in range(0, n, step):
            hi = min(n, lo + step)
            list(pool.map(lambda i: client.start(AGENT, f"parked {i}"), range(lo, hi)))
            target = base_armed + hi
            while True:
                time.sleep(0.5)
                seen_threads.append(proc_status(pid)["Threads"])
                seen_conns.append(len(pg_ports(pid)))
                now = armed_count(client.engine)
                if now != armed:
                    armed, last_progress = now, time.monotonic()
                if armed >= target:
                    break
                st = status_counts(client.engine)
                failed = sum(
                    v for k, v in st.items() if k not in ("PENDING", "ENQUEUED", "SUCCESS")
                )
                if armed + failed >= target or time.monotonic() - last_progress > 120:
                    break
                if int(time.monotonic()) % 10 == 0:
                    log(f"park: {armed - base_armed}/{n} armed, worker threads {seen_threads[-1]}")
    t_seen = time.time()
    last = last_armed_ms(client.engine)
    t_last = last / 1000 if last is not None else t_seen
    return (
        t_last - t_first,
        cpu_seconds(pid) - cpu0,
        armed - base_armed,
        failed,
        seen_threads,
        max(seen_conns, default=0),
    )


def idle_cpu_pct(pid: int, seconds: float) -> tuple[float, float]:
    """(wall s, the worker's CPU % of one core) over ``seconds`` of doing nothing."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    wall = time.monotonic() - t0
    return wall, (cpu_seconds(pid) - c0) / wall * 100


def sequential(
    client: AgentClient, samples: list[tuple[str, str]]
) -> tuple[list[float], list[float], float, float]:
    """Submit -> run finished and -> tool message recorded (ms), one session at a time;
    and the WAL KB and full-page images written per resume."""
    t0s: dict[str, float] = {}
    wal0 = wal_written(client.engine)
    for sid, tcid in samples:
        t0s[sid] = timed_submit(client, sid, tcid)[0]
        wait_finished(client, sid)
    wal1 = wal_written(client.engine)
    fins = finish_times(client.engine, list(t0s), connect_retrying)
    tools = tool_message_times(client.engine, list(t0s), connect_retrying)
    lat = [fin - t0s[s] * 1000 for s in t0s if (fin := fins[s][1]) is not None]
    tool_lat = [tools[s] - t0s[s] * 1000 for s in t0s if s in tools]
    n = max(1, len(samples))
    return lat, tool_lat, (wal1[0] - wal0[0]) / 1024 / n, (wal1[1] - wal0[1]) / n
