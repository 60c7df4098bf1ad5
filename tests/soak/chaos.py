"""The soak driver: two workers, a private Postgres, continuous mixed load, and chaos.

One ``Soak(config)`` runs the whole thing (see ``Soak.run``):

- a **fleet** of two worker subprocesses with stable executor ids; a dead worker is
  restarted with the same id after a short random pause (sometimes longer than the stale
  threshold, so the other one adopts its sessions first); some restarts arm a random crash
  point (``DBOS_AGENTS_CRASH_AT=<point>:<n>``) so the worker SIGKILLs itself mid-step;
- a **chaos** thread that plays a shuffled schedule of SIGKILLs, SIGTERMs, immediate Postgres
  restarts and long outages (Postgres stopped for longer than the stale threshold);
- a **load** thread that keeps sessions of every agent in flight, sends follow-ups
  (persistent sessions get several) and interrupts some sessions;
- a **submitter** thread that answers client tools and approvals, sometimes twice in a row,
  sometimes concurrently, sometimes not at all (the wait then times out).

Every client call is retried through outages (that is the caller's job). After the schedule
the workers are brought back, every session must reach a terminal status, and ``check``
verifies the invariants with SQL and the witness file. ``Soak.run`` returns a ``SoakReport``
with the counts, the violations and a diagnosis text.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import threading
import time
import traceback
from collections import Counter, defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import sqlalchemy as sa

from dbos_agents.errors import DatabaseUnavailableError, DbosAgentsError, SessionBusyError
from dbos_agents.outcome import TERMINAL
from dbos_agents.testing import CRASH_POINTS, CrashHarness, PrivateCluster, WorkerProcess
from dbos_agents.worker.process import STARTING_LINE

from .app import SIDE_EFFECTING, read_events

REPO = Path(__file__).resolve().parents[2]
APP = "tests.soak.app:runtime"
T = TypeVar("T")


@dataclass(frozen=True)
class SoakConfig:
    """How much chaos, how much load. ``SHORT`` runs in the default set, ``FULL`` with -m soak."""

    name: str
    kills: int
    sigterms: int
    pg_restarts: int
    long_outages: int
    event_gap: tuple[float, float]
    """Random pause between two chaos events (seconds)."""
    max_in_flight: int
    """Root sessions kept going at once."""
    seed: int = 7
    stale_after: float = 4.0
    heartbeat: float = 0.5
    grace: int = 2
    wait_timeout: float = 10.0
    """Client-tool and approval timeout inside the app."""
    idle_ttl: float = 5.0
    """Persistent sessions' inbox TTL."""
    settle_timeout: float = 300.0
    """After the chaos: how long every session gets to reach a terminal status."""
    armed_restart_prob: float = 0.25
    long_pause_prob: float = 0.2
    interrupt_prob: float = 0.1
    follow_up_prob: float = 0.15
    ignore_prob: float = 0.08
    """Waits the submitter leaves unanswered (they time out)."""
    agent_weights: tuple[tuple[str, int], ...] = (
        ("safe", 2),
        ("effect", 3),
        ("verified", 3),
        ("client", 3),
        ("approval", 2),
        ("parent", 2),
        ("pchat", 2),
        ("mixed", 2),
    )

    def scaled(self) -> SoakConfig:
        """Environment overrides for ad-hoc runs: SOAK_KILLS, SOAK_SIGTERMS, SOAK_PG_RESTARTS,
        SOAK_OUTAGES, SOAK_SEED."""
        env = os.environ
        return SoakConfig(
            **{
                **self.__dict__,
                "kills": int(env.get("SOAK_KILLS", self.kills)),
                "sigterms": int(env.get("SOAK_SIGTERMS", self.sigterms)),
                "pg_restarts": int(env.get("SOAK_PG_RESTARTS", self.pg_restarts)),
                "long_outages": int(env.get("SOAK_OUTAGES", self.long_outages)),
                "seed": int(env.get("SOAK_SEED", self.seed)),
            }
        )


SHORT = SoakConfig(
    name="short",
    kills=20,
    sigterms=2,
    pg_restarts=1,
    long_outages=0,
    event_gap=(1.5, 3.5),
    max_in_flight=8,
    settle_timeout=180.0,
)
FULL = SoakConfig(
    name="full",
    kills=200,
    sigterms=20,
    pg_restarts=3,
    long_outages=1,
    event_gap=(3.0, 8.0),
    max_in_flight=12,
    settle_timeout=600.0,
)


@dataclass
class Stats:
    kills: int = 0
    self_kills: int = 0
    sigterms: int = 0
    sigterm_exit_codes: list[int] = field(default_factory=list)
    sigterm_bad: list[str] = field(default_factory=list)
    pg_restarts: int = 0
    outages: int = 0
    outage_seconds: float = 0.0
    worker_starts: int = 0
    unexpected_exits: list[tuple[str, int, str]] = field(default_factory=list)
    sessions_started: int = 0
    follow_ups: int = 0
    interrupts: int = 0
    submits: int = 0
    duplicate_submits: int = 0
    client_errors: Counter[str] = field(default_factory=Counter)
    timeline: list[str] = field(default_factory=list)


@dataclass
class SoakReport:
    config: SoakConfig
    stats: Stats
    counts: dict[str, int]
    violations: dict[str, list[str]]
    summary: str
    diagnosis: str
    run_dir: Path

    @property
    def ok(self) -> bool:
        return not any(self.violations.values())


def _is_retryable(exc: BaseException) -> bool:
    """Connection trouble (an outage, a restart): the client's ``DatabaseUnavailableError``,
    or anything that is not our own domain error."""
    return isinstance(exc, DatabaseUnavailableError) or not isinstance(exc, DbosAgentsError)


class Fleet:
    """Two worker slots with stable executor ids; a dead worker comes back after a pause."""

    def __init__(self, soak: Soak) -> None:
        self.soak = soak
        self.cfg = soak.cfg
        self.ids = ("soak-a", "soak-b")
        self.procs: dict[str, WorkerProcess | None] = dict.fromkeys(self.ids)
        self.restart_at: dict[str, float] = dict.fromkeys(self.ids, 0.0)
        self.armed: dict[str, str | None] = dict.fromkeys(self.ids)
        self.expected_exit: dict[str, bool] = dict.fromkeys(self.ids, False)
        self.logs: dict[str, list[Path]] = {i: [] for i in self.ids}
        self.lifetimes: dict[str, list[list[float]]] = {i: [] for i in self.ids}
        """Per worker id: [start, end] wall-clock seconds of each process (end inf: alive)."""
        self.calm = False
        """No more armed crash points (after the chaos)."""
        self.lock = threading.RLock()

    def alive(self) -> list[str]:
        with self.lock:
            return [i for i, p in self.procs.items() if p is not None and p.popen.poll() is None]

    def _start(self, wid: str) -> None:
        rng = self.soak.rng
        crash_at = None
        if not self.calm and rng.random() < self.cfg.armed_restart_prob:
            point = rng.choice([p for p in CRASH_POINTS if p != "model_call"] + ["model_call"])
            crash_at = f"{point}:{rng.randint(1, 6)}"
        proc = self.soak.harness.start_worker(crash_at, executor_id=wid)
        self.procs[wid] = proc
        self.lifetimes[wid].append([time.time(), float("inf")])
        self.armed[wid] = crash_at
        self.expected_exit[wid] = False
        self.logs[wid].append(proc.log_path)
        self.soak.stats.worker_starts += 1
        self.soak.event(f"start {wid} pid={proc.pid}" + (f" armed={crash_at}" if crash_at else ""))

    def tick(self) -> None:
        """Notice deaths, restart what is due."""
        with self.lock:
            now = time.monotonic()
            for wid in self.ids:
                p = self.procs[wid]
                if p is not None and p.popen.poll() is not None:
                    code = p.popen.returncode
                    if not self.expected_exit[wid]:
                        if code == -signal.SIGKILL and self.armed[wid]:
                            self.soak.stats.self_kills += 1
                            self.soak.event(f"{wid} killed itself at {self.armed[wid]}")
                        else:
                            tail = p.log()[-1500:]
                            self.soak.stats.unexpected_exits.append((wid, code, str(p.log_path)))
                            self.soak.event(
                                f"{wid} exited unexpectedly code={code}: {tail[-300:]!r}"
                            )
                        self.restart_at[wid] = now + self._pause()
                    self._ended(wid)
                if self.procs[wid] is None and now >= self.restart_at[wid]:
                    self._start(wid)

    def _ended(self, wid: str) -> None:
        self.procs[wid] = None
        if self.lifetimes[wid] and self.lifetimes[wid][-1][1] == float("inf"):
            self.lifetimes[wid][-1][1] = time.time()

    def alive_throughout(self, wid: str, start: float, end: float) -> bool:
        """Was one process of ``wid`` running during the whole [start, end]?"""
        return any(a <= start and b >= end for a, b in self.lifetimes[wid])

    def _pause(self) -> float:
        rng = self.soak.rng
        if rng.random() < self.cfg.long_pause_prob:  # long enough for the other to adopt
            return rng.uniform(self.cfg.stale_after + 1.5, self.cfg.stale_after + 4.0)
        return rng.uniform(0.2, 1.5)

    def kill_random(self) -> bool:
        with self.lock:
            alive = self.alive()
            if not alive:
                return False
            wid = self.soak.rng.choice(alive)
            p = self.procs[wid]
            assert p is not None
            self.expected_exit[wid] = True
            p.kill()
            self._ended(wid)
            self.restart_at[wid] = time.monotonic() + self._pause()
            self.soak.stats.kills += 1
            self.soak.event(f"SIGKILL {wid} pid={p.pid}")
            return True

    def ready(self, wid: str) -> bool:
        """Started and serving (its signal handlers are installed)."""
        p = self.procs[wid]
        return p is not None and p.ready

    def sigterm_random(self) -> bool:
        """SIGTERM a live worker, as a deploy would (mostly one that serves, sometimes one
        still importing or launching), and wait for it to exit."""
        with self.lock:
            alive = self.alive()
            serving = [w for w in alive if self.ready(w)]
            if serving and self.soak.rng.random() < 0.75:
                alive = serving
            if not alive:
                return False
            wid = self.soak.rng.choice(alive)
            p = self.procs[wid]
            assert p is not None
            age = time.time() - self.lifetimes[wid][-1][0]
            was_ready = self.ready(wid)
            self.expected_exit[wid] = True
            self.restart_at[wid] = float("inf")  # not while it drains
        self.soak.event(
            f"SIGTERM {wid} pid={p.pid} age={age:.2f}s" + ("" if was_ready else " (not ready yet)")
        )
        p.popen.send_signal(signal.SIGTERM)
        try:
            code = p.popen.wait(timeout=self.cfg.grace + 30)
        except Exception:
            p.kill()
            code = -999
        self.soak.stats.sigterms += 1
        log = p.log()
        if code == -signal.SIGKILL and self.armed[wid] and "crash point" in log:
            # Its armed point came up in a step the drain let finish: the crash it was armed for.
            self.soak.stats.self_kills += 1
            self.soak.event(f"{wid} killed itself at {self.armed[wid]} while draining")
        # Before the worker installs its handler (interpreter start and imports, which take
        # seconds on a loaded machine) nothing can catch SIGTERM: -15 is then fine, nothing
        # ran. Once it printed STARTING_LINE, a worker must drain and exit 0.
        elif code != 0 and (was_ready or STARTING_LINE in log):
            self.soak.stats.sigterm_bad.append(
                f"{wid} pid={p.pid} exit={code} age={age:.2f}s ready={was_ready} log={p.log_path}"
            )
        self.soak.stats.sigterm_exit_codes.append(code)
        self.soak.event(f"{wid} exited after SIGTERM code={code}")
        with self.lock:
            self._ended(wid)
            self.restart_at[wid] = time.monotonic() + self.soak.rng.uniform(0.2, 1.5)
        return True

    def stop_all(self) -> None:
        with self.lock:
            self.restart_at = dict.fromkeys(self.ids, float("inf"))
            procs = [(w, p) for w, p in self.procs.items() if p is not None]
            for w, _ in procs:
                self.expected_exit[w] = True
        for w, p in procs:
            p.stop(timeout=self.cfg.grace + 20)
            with self.lock:
                self._ended(w)

    def log_tails(self, chars: int = 2500) -> str:
        out = []
        for wid in self.ids:
            for path in self.logs[wid][-2:]:
                text = path.read_text(errors="replace") if path.exists() else ""
                out.append(f"--- {wid} {path.name} (last {chars} chars)\n{text[-chars:]}")
        return "\n".join(out)

    def grep_logs(self, needles: tuple[str, ...], limit: int = 40) -> list[str]:
        hits = []
        for wid in self.ids:
            for path in self.logs[wid]:
                if not path.exists():
                    continue
                for line in path.read_text(errors="replace").splitlines():
                    if any(n in line for n in needles):
                        hits.append(f"{wid}/{path.name}: {line[:300]}")
        return hits[-limit:]


@dataclass
class Tracked:
    sid: str
    agent: str
    follow_ups_left: int
    interrupt_at: float | None = None
    follow_up_at: float | None = None
    interrupted: bool = False


class Soak:
    """See the module doc."""

    def __init__(self, cfg: SoakConfig, run_dir: Path, cluster: PrivateCluster) -> None:
        self.cfg = cfg
        self.run_dir = run_dir
        self.cluster = cluster
        self.rng = random.Random(cfg.seed)
        self.stats = Stats()
        self.t0 = time.monotonic()
        self.witness = run_dir / "witness.jsonl"
        self.stop_load = threading.Event()
        self.stop_submitter = threading.Event()
        self.chaos_done = threading.Event()
        self.tracked: dict[str, Tracked] = {}
        self.submits: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.submit_kind: dict[tuple[str, str], str] = {}
        self.errors: list[str] = []
        self.adoptions: set[tuple[str, str, float]] = set()
        self.call_failed: list[str] = []
        """Client calls refused with a domain error (e.g. a started session that vanished)."""
        self.lock = threading.Lock()
        self.harness = CrashHarness(
            APP,
            cluster.url,
            witness=self.witness,
            log_dir=run_dir / "logs",
            cwd=REPO,
            env={
                "DBOS_AGENTS_QUEUE_POLLING_INTERVAL_SEC": "0.05",
                "DBOS_AGENTS_STALE_AFTER_SEC": str(cfg.stale_after),
                "DBOS_AGENTS_HEARTBEAT_INTERVAL_SEC": str(cfg.heartbeat),
                "DBOS_AGENTS_SHUTDOWN_GRACE_SEC": str(cfg.grace),
                "DBOS_AGENTS_CONNECT_TIMEOUT_SEC": "2",
                "DBOS_AGENTS_LOG_LEVEL": "INFO",
                "SOAK_WAIT_TIMEOUT_SEC": str(cfg.wait_timeout),
                "SOAK_IDLE_TTL_SEC": str(cfg.idle_ttl),
            },
        )
        self.client = self.harness.client
        self.fleet = Fleet(self)

    # ---- plumbing -------------------------------------------------------------------------

    def event(self, text: str) -> None:
        line = f"{time.monotonic() - self.t0:8.2f}s {time.strftime('%H:%M:%S')} {text}"
        with self.lock:
            self.stats.timeline.append(line)

    def retry(self, what: str, fn: Callable[[], T], timeout: float = 90.0) -> T:
        """Call ``fn`` until it stops failing with connection trouble (outages, restarts)."""
        deadline = time.monotonic() + timeout
        delay = 0.1
        while True:
            try:
                return fn()
            except Exception as exc:
                if not _is_retryable(exc) or time.monotonic() > deadline:
                    raise
                with self.lock:
                    self.stats.client_errors[f"{what}:{type(exc).__name__}"] += 1
                time.sleep(delay)
                delay = min(delay * 2, 1.0)

    def _thread(self, name: str, target: Callable[[], None]) -> threading.Thread:
        def guarded() -> None:
            try:
                target()
            except Exception:
                with self.lock:
                    self.errors.append(f"{name} thread crashed:\n{traceback.format_exc()}")

        t = threading.Thread(target=guarded, name=f"soak-{name}", daemon=True)
        t.start()
        return t

    # ---- chaos ----------------------------------------------------------------------------

    def _chaos(self) -> None:
        cfg = self.cfg
        schedule = (
            ["kill"] * cfg.kills
            + ["term"] * cfg.sigterms
            + ["pg"] * cfg.pg_restarts
            + ["outage"] * cfg.long_outages
        )
        self.rng.shuffle(schedule)
        for ev in schedule:
            time.sleep(self.rng.uniform(*cfg.event_gap))
            if ev in ("kill", "term"):
                deadline = time.monotonic() + 60
                while not (
                    self.fleet.kill_random() if ev == "kill" else self.fleet.sigterm_random()
                ):
                    if time.monotonic() > deadline:
                        raise RuntimeError(f"no live worker to {ev} for 60 s")
                    time.sleep(0.2)
            elif ev == "pg":
                self.event("postgres restart (immediate)")
                self.cluster.restart(mode="immediate")
                self.stats.pg_restarts += 1
                self.event("postgres back")
            else:
                length = 2 * cfg.stale_after + 1
                self.event(f"postgres outage for {length:.1f}s")
                t = time.monotonic()
                self.cluster.stop(mode="immediate")
                time.sleep(length)
                self.cluster.start()
                self.stats.outages += 1
                self.stats.outage_seconds += time.monotonic() - t
                self.event("postgres back after outage")
        self.chaos_done.set()

    def _fleet_loop(self) -> None:
        last_watch = 0.0
        while not self.stop_submitter.is_set():
            self.fleet.tick()
            if time.monotonic() - last_watch > 0.5:
                last_watch = time.monotonic()
                self._watch_adoptions()
            time.sleep(0.1)

    def _watch_adoptions(self) -> None:
        """Record every adoption (executor, adopter, when) seen in the workers table."""
        try:
            with self.client.engine.connect() as conn:
                rows = conn.execute(
                    sa.text(
                        "SELECT executor_id, adopted_by, extract(epoch FROM adopted_at) AS at"
                        " FROM dbos_agents.workers WHERE adopted_by IS NOT NULL AND adopted_at IS NOT NULL"
                    )
                ).all()
        except Exception:
            return
        for r in rows:
            key = (r.executor_id, r.adopted_by, float(r.at))
            if key not in self.adoptions:
                self.adoptions.add(key)
                self.event(f"adoption: {r.adopted_by} adopted {r.executor_id}")

    # ---- load -----------------------------------------------------------------------------

    def _pick_agent(self) -> str:
        names, weights = zip(*self.cfg.agent_weights, strict=True)
        return self.rng.choices(names, weights)[0]

    def _statuses(self, sids: list[str]) -> dict[str, str]:
        def q() -> dict[str, str]:
            with self.client.engine.connect() as conn:
                rows = conn.execute(
                    sa.text("SELECT id, status FROM dbos_agents.sessions WHERE id = ANY(:ids)"),
                    {"ids": sids},
                ).all()
            return {r.id: r.status for r in rows}

        return self.retry("statuses", q)

    def _load(self) -> None:
        cfg, rng = self.cfg, self.rng
        n = 0
        while not self.stop_load.is_set():
            now = time.monotonic()
            active = [t for t in self.tracked.values() if t.follow_ups_left >= 0]
            statuses = self._statuses([t.sid for t in active]) if active else {}
            busy = 0
            for t in active:
                st = statuses.get(t.sid, "queued")
                terminal = st in TERMINAL
                if not terminal:
                    busy += 1
                    if t.interrupt_at is not None and now >= t.interrupt_at:
                        t.interrupt_at = None
                        try:
                            self.retry("interrupt", lambda t=t: self.client.interrupt(t.sid))
                        except DbosAgentsError as exc:
                            self.call_failed.append(f"interrupt {t.sid}: {exc!r}")
                            continue
                        t.interrupted = True
                        self.stats.interrupts += 1
                        self.event(f"interrupt {t.sid} ({t.agent})")
                    continue
                if t.follow_ups_left == 0:
                    t.follow_ups_left = -1  # done
                    continue
                if t.follow_up_at is None:
                    t.follow_up_at = now + rng.uniform(0.0, cfg.idle_ttl * 1.4)
                elif now >= t.follow_up_at:
                    t.follow_up_at = None
                    try:
                        self.retry(
                            "send", lambda t=t, n=n: self.client.send(t.sid, f"{t.agent}-more-{n}")
                        )
                    except SessionBusyError:
                        continue
                    except DbosAgentsError as exc:
                        self.call_failed.append(f"send {t.sid}: {exc!r}")
                        t.follow_ups_left = -1
                        continue
                    t.follow_ups_left -= 1
                    self.stats.follow_ups += 1
                    if rng.random() < cfg.interrupt_prob:
                        t.interrupt_at = now + rng.uniform(0.2, 3.0)
                    busy += 1
            if busy < cfg.max_in_flight:
                agent = self._pick_agent()
                n += 1
                sid = self.retry("start", lambda a=agent, n=n: self.client.start(a, f"{a}-{n}"))
                follow = (
                    rng.randint(1, 3)
                    if agent == "pchat"
                    else int(rng.random() < cfg.follow_up_prob)
                )
                t = Tracked(sid=sid, agent=agent, follow_ups_left=follow)
                if rng.random() < cfg.interrupt_prob:
                    t.interrupt_at = now + rng.uniform(0.2, 4.0)
                    if t.follow_ups_left == 0 and rng.random() < 0.5:
                        t.follow_ups_left = 1  # continue it after the interrupt
                self.tracked[sid] = t
                self.stats.sessions_started += 1
            time.sleep(0.15)

    # ---- submitter ------------------------------------------------------------------------

    def _submit_once(self, root: str, call_id: str, kind: str, answer: dict[str, Any]) -> None:
        def go() -> str:
            if kind == "approval":
                out = self.client.submit_approval(root, call_id, **answer)
            elif "error" in answer:
                out = self.client.submit_tool_result(root, call_id, error=answer["error"])
            else:
                out = self.client.submit_tool_result(root, call_id, result=answer)
            return out.status

        try:
            status = self.retry("submit", go)
        except Exception as exc:
            status = f"raised {type(exc).__name__}: {exc}"
        with self.lock:
            self.submits[(root, call_id)].append(status)
            self.stats.submits += 1

    def _submitter(self) -> None:
        rng = self.rng
        seen: set[tuple[str, str]] = set()
        due: list[tuple[float, Callable[[], None]]] = []
        with ThreadPoolExecutor(max_workers=6, thread_name_prefix="soak-submit") as pool:
            while not self.stop_submitter.is_set():
                try:
                    pending = self.client.pending(limit=1000)
                except Exception as exc:
                    self.stats.client_errors[f"pending:{type(exc).__name__}"] += 1
                    pending = []
                now = time.monotonic()
                for p in pending:
                    key = (p.root_session_id, p.tool_call_id)
                    if key in seen or p.status != "waiting":
                        continue
                    seen.add(key)
                    if rng.random() < self.cfg.ignore_prob:
                        continue  # let it time out
                    answer: dict[str, Any]
                    if p.kind == "approval":
                        answer = {"approved": rng.random() < 0.7, "reason": "soak"}
                    elif rng.random() < 0.15:
                        answer = {"error": f"soak says no to {p.tool_call_id}"}
                    else:
                        answer = {"answer": f"ans:{p.tool_call_id}"}
                    self.submit_kind[key] = p.kind
                    at = now + rng.uniform(0.0, 1.5)
                    mode = rng.random()

                    def job(
                        k: tuple[str, str] = key, kd: str = p.kind, a: dict[str, Any] = answer
                    ) -> None:
                        self._submit_once(k[0], k[1], kd, a)

                    if mode < 0.5:
                        due.append((at, job))
                    elif mode < 0.75:  # the same answer again, later (maybe after a restart)
                        due.append((at, job))
                        due.append((at + rng.uniform(0.3, 4.0), job))
                        self.stats.duplicate_submits += 1
                    else:  # the same answer, three times at once
                        due.extend((at, job) for _ in range(3))
                        self.stats.duplicate_submits += 1
                ready = [d for d in due if d[0] <= now]
                due = [d for d in due if d[0] > now]
                for _, job in ready:
                    pool.submit(job)
                time.sleep(0.2)

    # ---- the run --------------------------------------------------------------------------

    def run(self) -> SoakReport:
        cfg = self.cfg
        self.event(f"soak {cfg.name}: {cfg}")
        self.fleet.tick()  # both workers up
        fleet_t = self._thread("fleet", self._fleet_loop)
        submit_t = self._thread("submitter", self._submitter)
        load_t = self._thread("load", self._load)
        chaos_t = self._thread("chaos", self._chaos)
        chaos_t.join()
        self.event("chaos over; settling")
        self.stop_load.set()
        load_t.join(timeout=120)
        self.fleet.calm = True
        if not self.cluster.is_running():
            self.cluster.start()
        with self.fleet.lock:  # bring both workers back now
            for wid in self.fleet.ids:
                self.fleet.restart_at[wid] = 0.0
        settled = self._wait_terminal(cfg.settle_timeout)
        self.event(f"sessions terminal: {settled}")
        self._wait_workflows(cfg.idle_ttl + cfg.wait_timeout + 30)
        self.stop_submitter.set()
        submit_t.join(timeout=60)
        fleet_t.join(timeout=10)
        self.fleet.stop_all()
        elapsed = time.monotonic() - self.t0
        counts, violations, focus = check(self)
        if self.errors:
            violations["driver_errors"] = self.errors
        if self.call_failed:
            violations["client_call_failed"] = self.call_failed
        adopted_exits = [e for e in self.stats.unexpected_exits if e[1] == 75]
        if adopted_exits:  # the worker found itself adopted while it was running
            violations.setdefault("adopted_live_worker", []).extend(
                f"{w} exited 75 (adopted while alive), log {path}" for w, _, path in adopted_exits
            )
        if self.stats.unexpected_exits:
            counts["unexpected_worker_exits"] = len(self.stats.unexpected_exits)
        if self.stats.sigterm_bad:
            violations["sigterm_unclean_exit"] = self.stats.sigterm_bad
        nviol = sum(len(v) for v in violations.values())
        s = self.stats
        summary = (
            f"soak[{cfg.name}]: sessions={counts['sessions']} roots={counts['roots']}"
            f" kills={s.kills} self_kills={s.self_kills} sigterms={s.sigterms}"
            f" pg_restarts={s.pg_restarts} outages={s.outages}"
            f" effects={counts['effects']} side_effect_calls={counts['side_effect_calls']}"
            f" durability_errors={counts['durability_errors']}"
            f" verified={counts['verified']} timeouts={counts['timeouts']}"
            f" submits={s.submits} duplicate_submits={s.duplicate_submits}"
            f" interrupts={s.interrupts} follow_ups={s.follow_ups}"
            f" worker_starts={s.worker_starts} adoptions={counts['adoptions']}"
            f" violations={nviol}"
            f" elapsed={elapsed:.0f}s"
        )
        diagnosis = diagnose(self, violations, focus)
        report = SoakReport(cfg, s, counts, violations, summary, diagnosis, self.run_dir)
        (self.run_dir / "summary.txt").write_text(summary + "\n")
        (self.run_dir / "report.txt").write_text(
            summary + "\n\n" + diagnosis + "\n\nTIMELINE\n" + "\n".join(s.timeline) + "\n"
        )
        self.harness.close()
        return report

    def _wait_terminal(self, timeout: float) -> bool:
        """Until every session is terminal; gives up early when the only sessions left have
        no live workflow (nothing can ever move them) for 20 s in a row."""
        deadline = time.monotonic() + timeout
        hopeless_since: float | None = None
        while time.monotonic() < deadline:
            try:
                with self.client.engine.connect() as conn:
                    left = conn.execute(
                        sa.text(
                            "SELECT s.id, w.status AS wf FROM dbos_agents.sessions s"
                            " LEFT JOIN dbos.workflow_status w ON w.workflow_uuid = s.workflow_id"
                            " WHERE s.status NOT IN :t"
                        ).bindparams(sa.bindparam("t", expanding=True)),
                        {"t": list(TERMINAL)},
                    ).all()
                if not left:
                    return True
                if all(
                    r.wf in ("ERROR", "SUCCESS", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
                    for r in left
                ):
                    hopeless_since = hopeless_since or time.monotonic()
                    if time.monotonic() - hopeless_since > 20:
                        self.event(f"giving up: {len(left)} sessions stuck with no live workflow")
                        return False
                else:
                    hopeless_since = None
            except Exception:
                pass
            time.sleep(0.5)
        return False

    def _wait_workflows(self, timeout: float) -> None:
        """Persistent sessions keep their workflow until the idle TTL: let them end."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception), self.client.engine.connect() as conn:
                n = conn.execute(
                    sa.text(
                        "SELECT count(*) FROM dbos.workflow_status"
                        " WHERE status IN ('PENDING', 'ENQUEUED')"
                    )
                ).scalar_one()
                if n == 0:
                    return
            time.sleep(0.5)


# ---- invariants ---------------------------------------------------------------------------


def _rows(conn: sa.Connection, sql: str, **params: Any) -> list[Any]:
    return list(conn.execute(sa.text(sql), params).all())


def check(soak: Soak) -> tuple[dict[str, int], dict[str, list[str]], set[str]]:
    """Every invariant of the issue, from SQL and the witness; returns (counts, violations,
    session ids worth showing)."""
    v: dict[str, list[str]] = defaultdict(list)
    focus: set[str] = set()
    events = read_events(soak.witness)
    effects: Counter[str] = Counter(
        e["key"] for e in events if e["kind"] == "effect" and e["tool"] in SIDE_EFFECTING
    )
    effect_session = {e["key"]: e["session"] for e in events if e["kind"] == "effect"}
    with soak.client.engine.connect() as conn:
        sessions = {r.id: r for r in _rows(conn, "SELECT * FROM dbos_agents.sessions")}
        calls = _rows(conn, "SELECT * FROM dbos_agents.tool_calls")
        tool_msgs = Counter(
            (r.session_id, r.tool_call_id)
            for r in _rows(
                conn,
                "SELECT session_id, tool_call_id FROM dbos_agents.messages WHERE role = 'tool'",
            )
        )
        assistant_calls = [
            (r.session_id, c["id"])
            for r in _rows(
                conn,
                "SELECT session_id, tool_calls FROM dbos_agents.messages WHERE role = 'assistant'",
            )
            for c in r.tool_calls
        ]
        pending = _rows(
            conn, "SELECT *, deadline < now() AS overdue FROM dbos_agents.pending_calls"
        )
        bad_wf = _rows(
            conn,
            "SELECT workflow_uuid, status, name, executor_id, recovery_attempts,"
            " left(coalesce(error, ''), 300) AS error FROM dbos.workflow_status"
            " WHERE status NOT IN ('SUCCESS', 'CANCELLED')",
        )
        notif = _rows(
            conn,
            "SELECT destination_uuid, topic, count(*) AS n FROM dbos.notifications"
            " WHERE message_uuid NOT LIKE 'interrupt::%' AND topic <> 'dbos_agents.inbox'"
            " GROUP BY destination_uuid, topic HAVING count(*) > 1",
        )

    # every session terminal, none failed
    for s in sessions.values():
        if s.status not in TERMINAL:
            v["session_not_terminal"].append(f"{s.id} agent={s.agent} status={s.status}")
            focus.add(s.id)
        elif s.status == "failed":
            v["session_failed"].append(f"{s.id} agent={s.agent} error={s.error!r}")
            focus.add(s.id)
    for t in soak.tracked.values():
        if t.sid not in sessions:
            v["session_missing"].append(f"{t.sid} agent={t.agent} was started but has no row")

    # no workflow in ERROR (nor stuck)
    for w in bad_wf:
        kind = (
            "workflow_error"
            if w.status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED")
            else ("workflow_not_finished")
        )
        v[kind].append(
            f"{w.workflow_uuid} {w.status} {w.name} executor={w.executor_id}"
            f" recovery_attempts={w.recovery_attempts} error={w.error!r}"
        )
        focus.add(w.workflow_uuid.split("::run::")[0])

    # exactly one result per call, ledger consistent with the transcript
    ledger_keys = set()
    durability = verified = timeouts = side_calls = 0
    by_call = {}
    for c in calls:
        ledger_keys.add((c.session_id, c.tool_call_id))
        by_call[(c.session_id, c.tool_call_id)] = c
        n = tool_msgs.get((c.session_id, c.tool_call_id), 0)
        sess = sessions.get(c.session_id)
        interrupted = sess is not None and sess.status == "interrupted"
        if n > 1:
            v["result_duplicated"].append(f"{c.session_id}/{c.tool_call_id}: {n} tool messages")
            focus.add(c.session_id)
        elif n == 0 and not interrupted:  # an interrupt may leave calls unanswered
            v["result_missing"].append(
                f"{c.session_id}/{c.tool_call_id} {c.tool} ledger={c.status}"
                f" session={sess.status if sess else None}"
            )
            focus.add(c.session_id)
        if n == 1 and c.status not in ("completed", "failed"):
            v["ledger_behind_transcript"].append(
                f"{c.session_id}/{c.tool_call_id} {c.tool} has a result but ledger={c.status}"
            )
            focus.add(c.session_id)
        if c.error_kind == "tool-durability-error":
            durability += 1
        if c.error_kind == "client_tool_timeout":
            timeouts += 1
        if c.result and c.result.get("verified"):
            verified += 1
    for sid, cid in assistant_calls:
        if (sid, cid) not in ledger_keys:
            v["call_without_ledger_row"].append(f"{sid}/{cid}")
            focus.add(sid)
    for (sid, cid), _n in tool_msgs.items():
        if (sid, cid) not in ledger_keys:
            v["result_without_ledger_row"].append(f"{sid}/{cid}")
            focus.add(sid)

    # effects <= 1 per side-effecting call, and what the ledger says
    side_keys = {}
    for c in calls:
        if c.tool not in SIDE_EFFECTING:
            continue
        side_calls += 1
        side_keys[c.idempotency_key] = c
        n = effects.get(c.idempotency_key, 0)
        where = f"{c.session_id}/{c.tool_call_id} {c.tool} ledger={c.status}/{c.error_kind}"
        if n > 1:
            v["effect_more_than_once"].append(f"{where}: {n} effects")
            focus.add(c.session_id)
            continue
        msg = ((c.result or {}).get("error") or {}).get("message", "")
        if c.status == "completed" and n != 1:
            v["ledger_completed_without_effect"].append(f"{where}: {n} effects")
            focus.add(c.session_id)
        elif c.status == "requested" and n != 0:
            v["effect_but_ledger_requested"].append(f"{where}: {n} effects")
            focus.add(c.session_id)
        elif (
            c.status == "failed"
            and n != 0
            and (
                c.error_kind in ("approval-denied", "client_tool_timeout", "client-error")
                or (c.error_kind == "interrupted" and "did not run" in msg)
            )
        ):
            v["effect_but_ledger_says_not_run"].append(f"{where}: {n} effects ({msg[:80]})")
            focus.add(c.session_id)
    for key in effects:
        if key not in side_keys:
            v["effect_without_ledger_row"].append(f"key={key} session={effect_session.get(key)}")

    # no pending row open at the end (least of all past its deadline)
    for p in pending:
        if p.status in ("waiting", "submitted"):
            v["pending_open" + ("_past_deadline" if p.overdue else "")].append(
                f"{p.root_session_id}/{p.tool_call_id} {p.kind} status={p.status}"
                f" owner={p.owner_session_id} deadline={p.deadline:%H:%M:%S}"
            )
            focus.add(p.root_session_id)

    # duplicate submits delivered once; an accepted submit is the call's result
    for (root, cid), outs in soak.submits.items():
        acc = outs.count("accepted")
        raised = [o for o in outs if o.startswith("raised")]
        if acc > 1:
            v["submit_accepted_twice"].append(f"{root}/{cid}: {outs}")
            focus.add(root)
        if raised:
            v["submit_raised"].append(f"{root}/{cid}: {raised}")
        if acc == 1:
            owner = next(
                (
                    p.owner_session_id
                    for p in pending
                    if p.root_session_id == root and p.tool_call_id == cid
                ),
                None,
            )
            row = by_call.get((owner, cid)) if owner else None
            if row is not None and row.error_kind == "client_tool_timeout":
                v["accepted_submit_lost"].append(
                    f"{root}/{cid} owner={owner}: accepted, but the call timed out"
                )
                focus.add(root)
    for r in notif:
        v["message_delivered_twice"].append(f"{r.destination_uuid} topic={r.topic}: {r.n} rows")
        focus.add(r.destination_uuid.split("::")[0])

    # adoption never takes a live worker
    for executor, adopter, at in sorted(soak.adoptions, key=lambda a: a[2]):
        window = soak.cfg.stale_after + 2.0  # time enough for a fresh process to heartbeat
        if soak.fleet.alive_throughout(executor, at - window, at):
            v["adopted_live_worker"].append(
                f"{adopter} adopted {executor} at {time.strftime('%H:%M:%S', time.localtime(at))}"
                f" while that process had been running for over {window:.0f}s"
            )

    counts = {
        "sessions": len(sessions),
        "adoptions": len(soak.adoptions),
        "roots": sum(1 for s in sessions.values() if s.parent_session_id is None),
        "effects": sum(effects.values()),
        "side_effect_calls": side_calls,
        "durability_errors": durability,
        "verified": verified,
        "timeouts": timeouts,
    }
    roots = {sessions[s].root_session_id if s in sessions else s for s in focus}
    return counts, {k: x for k, x in v.items() if x}, roots


def diagnose(soak: Soak, violations: dict[str, list[str]], focus: set[str]) -> str:
    """Everything needed to understand a failure: per invariant, the offending rows; per
    session (a few), its sessions, history, ledger, pending rows and witness events; the
    tail of the worker logs and their errors."""
    if not violations:
        return "no violations"
    out = ["VIOLATIONS"]
    for name, items in violations.items():
        out.append(f"== {name} ({len(items)})")
        out.extend(f"   {x}" for x in items[:15])
    events = read_events(soak.witness)
    try:
        with soak.client.engine.connect() as conn:
            for root in sorted(focus)[:6]:
                out.append(f"\n#### session tree {root}")
                for s in _rows(
                    conn,
                    "SELECT id, agent, status, run_seq, workflow_id, error, inbox_open,"
                    " to_char(created_at, 'HH24:MI:SS.MS') AS created,"
                    " to_char(updated_at, 'HH24:MI:SS.MS') AS updated"
                    " FROM dbos_agents.sessions WHERE root_session_id = :r ORDER BY created_at",
                    r=root,
                ):
                    out.append(f"session {dict(s._mapping)}")
                    for m in _rows(
                        conn,
                        "SELECT seq, run_seq, role, left(content, 160) AS content, tool_call_id,"
                        " tool_calls FROM dbos_agents.messages WHERE session_id = :s ORDER BY seq",
                        s=s.id,
                    ):
                        ids = [c["id"] for c in m.tool_calls] if m.tool_calls else ""
                        out.append(
                            f"  msg {m.seq} run={m.run_seq} {m.role} {m.tool_call_id or ''}"
                            f" {ids} {m.content!r}"
                        )
                    for c in _rows(
                        conn,
                        "SELECT tool_call_id, tool, status, attempts, error_kind, run_seq, turn,"
                        " idempotency_key, to_char(dispatched_at, 'HH24:MI:SS.MS') AS dispatched,"
                        " to_char(completed_at, 'HH24:MI:SS.MS') AS completed"
                        " FROM dbos_agents.tool_calls WHERE session_id = :s",
                        s=s.id,
                    ):
                        n = sum(
                            1
                            for e in events
                            if e["kind"] == "effect" and e["key"] == c.idempotency_key
                        )
                        out.append(f"  ledger {dict(c._mapping)} effects={n}")
                    for w in _rows(
                        conn,
                        "SELECT workflow_uuid, status, executor_id, recovery_attempts,"
                        " left(coalesce(error,''), 200) AS error FROM dbos.workflow_status"
                        " WHERE workflow_uuid = :s OR workflow_uuid LIKE :p",
                        s=s.id,
                        p=s.id + "::%",
                    ):
                        out.append(f"  workflow {dict(w._mapping)}")
                for p in _rows(
                    conn,
                    "SELECT tool_call_id, kind, status, owner_workflow_id, deadline, submitted_at,"
                    " resolved_at FROM dbos_agents.pending_calls WHERE root_session_id = :r",
                    r=root,
                ):
                    out.append(f"  pending {dict(p._mapping)}")
                for k, outs in soak.submits.items():
                    if k[0] == root:
                        out.append(f"  submits {k[1]}: {outs}")
                for e in events:
                    if e.get("root") == root:
                        out.append(f"  witness {json.dumps(e, sort_keys=True)}")
    except Exception as exc:
        out.append(f"(diagnosis query failed: {exc})")
    out.append("\nWORKER LOG ERRORS")
    out.extend(
        soak.fleet.grep_logs(("Traceback", "ERROR", "Error:", "error", "adopted", "unknown"))
    )
    out.append("\nWORKER LOG TAILS")
    out.append(soak.fleet.log_tails())
    return "\n".join(out)
