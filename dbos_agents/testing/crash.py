"""The crash harness: kill a real worker at a named crash point, restart it, check the result.

Users point it at their own app (``module:runtime``, as for ``dbos-agents worker``)::

    harness = CrashHarness("myapp.worker:runtime", database_url=url, witness=tmp_path / "w.jsonl")
    drill = harness.drill("support", "refund order 42", crash_at="after_handler")
    assert drill.crashed and drill.session.status == "completed"

A drill starts a session through ``AgentClient`` (no DBOS launch in the test process),
starts a worker with ``DBOS_AGENTS_CRASH_AT`` armed for that session only, waits for the
worker to die by SIGKILL, starts a clean worker with the same executor id (so DBOS recovers the session), and waits
for the session to end. Witness files and worker logs stay on disk for post-mortems.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa

from .. import _dbos
from ..client import AgentClient
from ..loop.crashpoints import ALL_POINTS
from ..loop.crashpoints import ENV_VAR as CRASH_ENV
from ..loop.crashpoints import SESSION_ENV_VAR as CRASH_SESSION_ENV
from ..outcome import TERMINAL, SessionInfo
from ..records import HistoryEntry, ToolCallRecord
from ..store import runs
from ..store.schema import SCHEMA as S
from .witness import ENV_VAR as WITNESS_ENV

READY = "dbos-agents worker ready"
"""The line a worker prints once it has launched (``dbos_agents.worker.process``)."""


class WorkerProcess:
    """A ``dbos-agents`` worker running in a subprocess."""

    def __init__(self, popen: subprocess.Popen[bytes], log_path: Path) -> None:
        self.popen = popen
        self.log_path = log_path

    @property
    def pid(self) -> int:
        return self.popen.pid

    def wait(self, timeout: float) -> int:
        """Wait for exit; returns the exit code (``-9`` after SIGKILL)."""
        try:
            return self.popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise TimeoutError(
                f"worker {self.pid} still running after {timeout}s; log: {self.log()[-2000:]}"
            ) from None

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> int:
        """SIGTERM, then SIGKILL if it does not exit in time."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                return self.popen.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def ready(self) -> bool:
        """Launched: it printed its ready line (its recovery has begun, its signal
        handlers are installed)."""
        return READY in self.log()

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until the worker has launched; it exiting first, or ``timeout`` seconds, raise
        with its log's tail (a start can take seconds on a busy host)."""
        deadline = time.monotonic() + timeout
        while not self.ready:
            if self.popen.poll() is not None:
                raise RuntimeError(
                    f"worker {self.pid} exited {self.popen.returncode}: {self.log()[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"worker {self.pid} not ready after {timeout}s: {self.log()[-2000:]}"
                )
            time.sleep(0.05)


@dataclass
class DrillResult:
    """What one crash drill observed."""

    session_id: str
    crash_at: str
    crashed: bool
    """True when the first worker died by SIGKILL (the crash point was reached)."""
    session: SessionInfo
    history: list[HistoryEntry]
    tool_calls: list[ToolCallRecord]
    logs: list[str] = field(default_factory=list)


class CrashHarness:
    """Runs worker subprocesses for ``app`` against ``database_url``."""

    def __init__(
        self,
        app: str,
        database_url: str,
        *,
        witness: str | os.PathLike[str] | None = None,
        env: Mapping[str, str] | None = None,
        executor_id: str = "crash-harness-worker",
        log_dir: str | os.PathLike[str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.app = app
        self.database_url = database_url
        self.witness = Path(witness) if witness is not None else None
        self.env = dict(env or {})
        self.executor_id = executor_id
        self.log_dir = (
            Path(log_dir) if log_dir is not None else Path.cwd() / ".dbos_agents" / "crash"
        )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.cwd = cwd
        self._starts = 0
        self.client = AgentClient(database_url)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> CrashHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start_worker(
        self,
        crash_at: str | None = None,
        *,
        executor_id: str | None = None,
        session_id: str | None = None,
    ) -> WorkerProcess:
        """Start a worker; with ``crash_at`` it SIGKILLs itself at that crash point (with
        ``session_id``, only in that session's workflows). ``executor_id`` defaults to the
        harness's, so a restart recovers the same work."""
        if crash_at is not None and crash_at.partition(":")[0] not in ALL_POINTS:
            raise ValueError(f"unknown crash point {crash_at!r}; known: {ALL_POINTS}")
        env = {**os.environ, **self.env}
        env["DBOS_AGENTS_DATABASE_URL"] = self.database_url
        env["DBOS_AGENTS_EXECUTOR_ID"] = executor_id or self.executor_id
        env.setdefault("DBOS_AGENTS_QUEUE_POLLING_INTERVAL_SEC", "0.05")
        env.pop(CRASH_ENV, None)
        env.pop(CRASH_SESSION_ENV, None)
        if crash_at is not None:
            env[CRASH_ENV] = crash_at
            if session_id is not None:
                env[CRASH_SESSION_ENV] = session_id
        if self.witness is not None:
            env[WITNESS_ENV] = str(self.witness)
        self._starts += 1
        log_path = self.log_dir / f"worker-{os.getpid()}-{self._starts}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - owned by the subprocess
        popen = subprocess.Popen(
            [sys.executable, "-m", "dbos_agents.cli", "worker", "--app", self.app],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=self.cwd,
        )
        log.close()
        return WorkerProcess(popen, log_path)

    def _await_replayed(self, session_id: str, workflow_id: str, timeout: float) -> None:
        """Wait for the recovering worker to end the run's workflow in DBOS. The outcome
        event commits with the run's end (``session.v4``), so after a crash right after it
        the outcome is there before the replay has caught up; stopping the worker then
        would only park the replay (a drain), leaving the workflow PENDING. A persistent
        session's workflow does not end: it is not waited for."""
        sql = sa.text(
            f"SELECT ws.status, s.inbox_open FROM {_dbos.quoted(self.client.settings.dbos_system_schema)}."
            f"workflow_status ws JOIN {S}.sessions s ON s.id = :s WHERE ws.workflow_uuid = :w"
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.client.engine.connect() as conn:
                row = conn.execute(sql, {"s": session_id, "w": workflow_id}).first()
            if row is None or row.inbox_open or row.status not in ("PENDING", "ENQUEUED"):
                return
            time.sleep(0.05)
        raise TimeoutError(f"workflow {workflow_id} of {session_id} still running")

    def drill(
        self,
        agent: str,
        message: str,
        *,
        crash_at: str,
        timeout: float = 90.0,
        user_id: str | None = None,
        tenant_id: str | None = None,
    ) -> DrillResult:
        """Run a session through a crash at ``crash_at`` and a recovery; see the module doc."""
        # The session first, so the crash point can be narrowed to it: the worker may
        # recover and replay another session (one a previous worker left) through it.
        sid = self.client.start(agent, message, user_id=user_id, tenant_id=tenant_id)
        first = self.start_worker(crash_at, session_id=sid)
        try:
            deadline = time.monotonic() + timeout
            crashed = False
            while time.monotonic() < deadline:
                code = first.popen.poll()
                if code is not None:
                    crashed = code == -signal.SIGKILL
                    break
                info = self.client.session(sid)
                if info.status in TERMINAL:
                    # Ended: either the point was never reached, or it is right after the
                    # run's end (``after_run_end``) and the worker is dying as we look.
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        crashed = first.popen.wait(timeout=2.0) == -signal.SIGKILL
                    break
                time.sleep(0.05)
            else:
                raise TimeoutError(f"no crash and no end within {timeout}s: {first.log()[-2000:]}")
        finally:
            first.kill()
        second = self.start_worker()
        try:
            info = self.client.wait(sid, timeout=timeout)
            # The session's status and the run's outcome commit together (``store.runs``).
            if runs.get(self.client.engine, sid, info.run_seq) is None:
                raise AssertionError(f"run {info.run_seq} of {sid} ended without an outcome")
            self._await_replayed(sid, info.workflow_id, timeout)
        finally:
            second.stop()
        return DrillResult(
            session_id=sid,
            crash_at=crash_at,
            crashed=crashed,
            session=info,
            history=self.client.history(sid),
            tool_calls=self.client.tool_calls(sid),
            logs=[first.log(), second.log()],
        )
