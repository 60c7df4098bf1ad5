"""Release policy: a release recovers the runs of the previous release.

A worker of the previous release (the commit in ``PREVIOUS_RELEASE``, built by
``conftest.py`` into a venv of its own) leaves runs in the states a deploy can catch them
in, and is SIGKILLed:

- ``asker``: parked on a client-tool wait;
- ``closer``: parked on an approval;
- ``interrupted``: interrupted while its client-tool wait was parked (a follow-up comes later);
- ``charge``: killed inside a side-effecting tool without ``verify``, after its effect;
- ``refund``: killed inside a side-effecting tool with ``verify``, before its effect;
- ``manager``: its sub-agent ``helper`` waiting on a client tool (addressed by the root);
- ``concierge``: a persistent session idle on its inbox between runs (parked);
- ``echo``: started by the previous release's client while no worker runs (only enqueued).

Then a worker of this tree's code, with the same executor id and the default application
version, must finish every one of them once the waits are answered and the follow-ups sent:
expected outputs, each effect at most once (the killed calls end with a durability error
the model read, or verified and run once), no failed run, no workflow in ERROR.

The previous release is driven only through its own command line (``start``, ``pending``,
``interrupt``, ``sessions``, ``show``), so every row it leaves was written by its code on
its own schema. This code's ``AgentClient`` is opened only after the old worker is dead:
it applies this code's migrations (``AgentClient(url)`` migrates) over those rows, as an
upgrade would. The test uses only the public API and the CLI of both.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from dbos import DBOSClient

import dbos_agents
from dbos_agents import AgentClient, SessionInfo
from dbos_agents.testing import create_fresh_database, drop_database

from .app import EFFECTS_ENV, RELEASE_ENV, effects

if TYPE_CHECKING:
    from .conftest import PreviousRelease

pytestmark = [pytest.mark.integration, pytest.mark.crash, pytest.mark.timeout(900)]

APP = Path(__file__).resolve().parent / "app.py"
EXECUTOR_ID = "upgrade-worker"
"""Both workers' (DBOS recovers only PENDING workflows of the same executor id)."""
PARK_AFTER = 0.5
"""``park_after_sec`` of both workers: a wait unanswered for 0.5 s leaves memory."""
WAIT = 90.0
"""Generous bound for every condition polled below."""
FAILED_WORKFLOW = {"ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}


@pytest.fixture(scope="module")
def upgrade_database_url(pg_server: str) -> Iterator[str]:
    name = f"dbos_agents_upgrade_{os.getpid()}"
    yield create_fresh_database(pg_server, name)
    drop_database(pg_server, name)


def until(check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll ``check`` until it returns something truthy (returned); fail naming ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout:g}s: {what}")
        time.sleep(0.2)


@dataclass
class Worker:
    """A ``dbos-agents worker`` subprocess (stdout and stderr in ``log_path``)."""

    label: str
    popen: subprocess.Popen[bytes]
    log_path: Path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self) -> str:
        return f"--- {self.label} worker log (tail) ---\n{self.log()[-4000:]}"

    def wait_ready(self) -> None:
        def ready() -> bool:
            if self.popen.poll() is not None:
                raise AssertionError(f"{self.label} worker exited {self.popen.returncode}")
            return "dbos-agents worker ready" in self.log()

        try:
            until(ready, f"the {self.label} worker is ready")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.tail()}") from None

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGKILL)
        self.popen.wait(timeout=30)

    def stop(self) -> int:
        """SIGTERM (a drain), SIGKILL if it has not exited after 30 s; the exit status."""
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                return self.popen.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.popen.returncode


class Deployment:
    """What both releases' processes share: the database, a copy of the app, the effects
    file and the directory they run in (never the repository: no ``config/`` or
    ``dbos-config.yaml`` of ours, no ``dbos_agents`` of this tree on the path)."""

    def __init__(self, database_url: str, root: Path) -> None:
        self.database_url = database_url
        self.root = root
        self.app_dir = root / "app"
        self.cwd = root / "cwd"
        self.effects = root / "effects.jsonl"
        self.release = root / "release"
        self.app_dir.mkdir()
        self.cwd.mkdir()
        shutil.copyfile(APP, self.app_dir / "upgrade_app.py")
        self.workers: list[Worker] = []

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
            and (not k.startswith("DBOS_AGENTS_") or k == "DBOS_AGENTS_BLOCK_REAL_MODELS")
        }
        env.update(
            PYTHONPATH=str(self.app_dir),
            DBOS_AGENTS_DATABASE_URL=self.database_url,
            DBOS_AGENTS_EXECUTOR_ID=EXECUTOR_ID,
            DBOS_AGENTS_PARK_AFTER_SEC=str(PARK_AFTER),
            **{EFFECTS_ENV: str(self.effects), RELEASE_ENV: str(self.release)},
        )
        return env

    def imports_from(self, python: str | Path) -> Path:
        """Where ``python`` finds ``dbos_agents`` in the workers' environment."""
        found = subprocess.run(
            [str(python), "-c", "import dbos_agents; print(dbos_agents.__file__)"],
            env=self.env(),
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert found.returncode == 0, found.stderr
        return Path(found.stdout.strip()).resolve()

    def start_worker(self, python: str | Path, label: str) -> Worker:
        log_path = self.root / f"{label}-worker.log"
        with open(log_path, "wb") as log:
            popen = subprocess.Popen(
                [str(python), "-m", "dbos_agents.cli", "worker", "--app", "upgrade_app:runtime"],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env(),
                cwd=self.cwd,
            )
        worker = Worker(label, popen, log_path)
        self.workers.append(worker)
        worker.wait_ready()
        return worker

    def cli(self, python: str | Path, *args: str) -> Any:
        """``dbos-agents <args> --json`` run by ``python``; its JSON output."""
        done = subprocess.run(
            [str(python), "-m", "dbos_agents.cli", *args, "--json"],
            env=self.env(),
            cwd=self.cwd,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, f"dbos-agents {args} exited {done.returncode}: {done}"
        return json.loads(done.stdout)

    def effect_pids(self, event: str, tool: str) -> list[object]:
        return [e["pid"] for e in effects(self.effects, event, tool)]


def _tool_results(client: AgentClient, session_id: str) -> list[dict[str, Any]]:
    return [json.loads(m.content or "null") for m in client.history(session_id) if m.role == "tool"]


def test_a_release_recovers_the_runs_of_the_previous_release(
    previous_release: PreviousRelease, upgrade_database_url: str, tmp_path: Path
) -> None:
    dep = Deployment(upgrade_database_url, tmp_path)
    old_py, new_py = previous_release.python, Path(sys.executable)
    # Each side imports its own code (a path leaking this tree into the old venv, or the
    # old venv into this side, would make the test compare a release with itself).
    assert dep.imports_from(old_py).is_relative_to(old_py.parent.parent.resolve())
    assert dep.imports_from(new_py) == Path(dbos_agents.__file__).resolve()
    try:
        _upgrade(dep, old_py, new_py)
    except BaseException:
        for worker in dep.workers:
            print(worker.tail(), file=sys.stderr)
        raise
    finally:
        for worker in dep.workers:
            worker.kill()


def _upgrade(dep: Deployment, old_py: Path, new_py: Path) -> None:
    # ---- 1. the previous release leaves runs in every state, then dies by SIGKILL ----
    old = dep.start_worker(old_py, "previous-release")
    starts = {
        "asker": ("asker", "what is your name?"),
        "closer": ("closer", "acct-7"),
        "interrupted": ("asker", "a question nobody answers"),
        "charge": ("payments", "charge"),
        "refund": ("payments", "refund"),
        "manager": ("manager", "ask the customer for me"),
        "concierge": ("concierge", "hello"),
    }
    sid = {
        key: dep.cli(old_py, "start", agent, text)["session_id"]
        for key, (agent, text) in starts.items()
    }

    def left_in_place() -> dict[str, dict[str, Any]] | None:
        waits = {p["root_session_id"]: p for p in dep.cli(old_py, "pending")}
        sessions = {s["id"]: s for s in dep.cli(old_py, "sessions", "--limit", "100")}
        in_tools = all(effects(dep.effects, "started", t) for t in ("charge", "refund"))
        idle = sessions.get(sid["concierge"], {}).get("status") == "completed"
        waiting = all(sid[k] in waits for k in ("asker", "closer", "interrupted", "manager"))
        return waits if in_tools and idle and waiting else None

    waits = until(left_in_place, "the previous release's runs are waiting and in their tools")
    call = {key: waits[sid[key]]["tool_call_id"] for key in ("asker", "closer", "interrupted")}
    call["manager"] = waits[sid["manager"]]["tool_call_id"]  # the helper's, by its root
    assert waits[sid["closer"]]["kind"] == "approval"
    assert waits[sid["manager"]]["owner_session_id"] != sid["manager"]  # the sub-agent's
    time.sleep(3 * PARK_AFTER)  # not an assertion: the root waits and the inbox park
    cut = dep.cli(old_py, "interrupt", sid["interrupted"])
    assert cut["cancelled_calls"] == [call["interrupted"]]
    assert old.popen.poll() is None, "the previous release's worker died on its own"
    old.kill()
    assert "Traceback" not in old.log(), old.tail()
    # Enqueued by the previous release while no worker runs: nobody has claimed it.
    sid["echo"] = dep.cli(old_py, "start", "echo", "started while no worker runs")["session_id"]

    # The negative control: nothing is finished yet, so finishing is the new code's doing.
    before = {s["id"]: s for s in dep.cli(old_py, "sessions", "--limit", "100")}
    status = {key: (before[s]["status"], before[s]["run_seq"]) for key, s in sid.items()}
    assert status == {
        "asker": ("running", 1),
        "closer": ("running", 1),
        "interrupted": ("interrupted", 1),
        "charge": ("running", 1),
        "refund": ("running", 1),
        "manager": ("running", 1),
        "concierge": ("completed", 1),
        "echo": ("queued", 1),
    }
    (helper,) = [s for s in before.values() if s["parent_session_id"] == sid["manager"]]
    assert helper["status"] == "running"
    for key in ("charge", "refund"):
        (ledger,) = dep.cli(old_py, "show", sid[key])["tool_calls"]
        assert ledger["status"] == "dispatched", ledger  # killed inside the handler
    assert dep.effect_pids("effect", "charge") == [old.popen.pid]  # charged, then killed
    assert dep.effect_pids("effect", "refund") == []  # killed before refunding
    assert dep.effect_pids("effect", "close_account") == []
    dep.release.touch()  # the blocking tools return at once from now on

    # ---- 2. this code takes over: same executor id, same database ----
    client = AgentClient(dep.database_url)  # applies this code's migrations over the rows
    try:
        # A submit while no worker runs is delivered by the recovery.
        out = client.submit_tool_result(sid["asker"], call["asker"], result={"answer": "Ada"})
        assert out.status == "accepted", out
        new = dep.start_worker(new_py, "current")
        out = client.submit_approval(sid["closer"], call["closer"], True, "checked")
        assert out.status == "accepted", out
        out = client.submit_tool_result(sid["manager"], call["manager"], result={"answer": "Bob"})
        assert out.status == "accepted", out
        client.send(sid["interrupted"], "reply: are you still there?")
        client.send(sid["concierge"], "second message")
        done = {key: _finished(client, key, s) for key, s in sid.items()}
        _check_outcomes(dep, client, sid, call, done, old.popen.pid, new.popen.pid)
        assert new.popen.poll() is None, "the current worker died"
        assert new.stop() == 0, new.tail()
        assert "Traceback" not in new.log(), new.tail()
        # The workflows the previous release left running, the sub-agent's included.
        left = [done[k].workflow_id for k in ("asker", "closer", "charge", "refund", "manager")]
        left += [s.workflow_id for s in client.sessions(limit=100) if s.parent_session_id]
    finally:
        client.close()
    _check_workflows(dep.database_url, left)


def _finished(client: AgentClient, key: str, session_id: str) -> SessionInfo:
    try:
        return client.wait(session_id, timeout=WAIT)
    except TimeoutError:
        info = client.session(session_id)
        raise AssertionError(
            f"the {key!r} session ({session_id}) left by the previous release is still"
            f" {info.status} (run {info.run_seq}) {WAIT:g}s after the upgrade"
        ) from None


def _check_outcomes(
    dep: Deployment,
    client: AgentClient,
    sid: dict[str, str],
    call: dict[str, str],
    done: dict[str, SessionInfo],
    old_pid: int,
    new_pid: int,
) -> None:
    outputs = {key: (info.status, info.run_seq, info.final_output) for key, info in done.items()}
    assert outputs == {
        "asker": ("completed", 1, 'asker got: {"answer":"Ada"}'),
        "closer": ("completed", 1, 'closer got: {"closed":"acct-7"}'),
        "interrupted": (
            "completed",
            2,
            "asker answers 'reply: are you still there?' after 4 messages",
        ),
        "charge": ("completed", 1, outputs["charge"][2]),  # checked below
        "refund": ("completed", 1, 'payments got: {"order_id":"order-refund","refunded":500}'),
        "manager": ("completed", 1, 'manager got: helper got: {"answer":"Bob"}'),
        "concierge": ("completed", 2, "concierge answers 'second message' after 3 messages"),
        "echo": ("completed", 1, "echo answers 'started while no worker runs' after 1 messages"),
    }
    # No session failed, the sub-agent's included.
    every = client.sessions(limit=100)
    assert len(every) == len(sid) + 1
    assert {s.status for s in every} == {"completed"}, [(s.id, s.status, s.error) for s in every]

    # The charge happened once, before the kill; the new code did not run it again: the
    # model read a durability error.
    assert dep.effect_pids("effect", "charge") == [old_pid]
    (charged,) = _tool_results(client, sid["charge"])
    assert charged["error"]["kind"] == "tool-durability-error", charged
    assert (outputs["charge"][2] or "").startswith('payments got: {"error"')
    (ledger,) = client.tool_calls(sid["charge"])
    assert (ledger.status, ledger.error_kind) == ("failed", "tool-durability-error"), ledger

    # The refund had not happened: verify said so to the new code, which then ran it once.
    assert [e["happened"] for e in effects(dep.effects, "verify", "refund")] == [False]
    assert dep.effect_pids("started", "refund") == [old_pid, new_pid]
    assert dep.effect_pids("effect", "refund") == [new_pid]
    (ledger,) = client.tool_calls(sid["refund"])
    assert ledger.status == "completed", ledger

    # The approved tool ran once, in the new worker.
    assert dep.effect_pids("effect", "close_account") == [new_pid]

    # Each wait answered once; a second answer is refused as such.
    for key in ("asker", "manager"):
        again = client.submit_tool_result(sid[key], call[key], result={"answer": "again"})
        assert again.status == "already_completed", again
    assert len(_tool_results(client, sid["asker"])) == 1

    # The interrupted call stays refused, and the follow-up run gave it its result.
    late = client.submit_tool_result(
        sid["interrupted"], call["interrupted"], result={"answer": "x"}
    )
    assert (late.status, late.reason) == ("unknown_tool_call", "interrupted"), late
    (cut,) = _tool_results(client, sid["interrupted"])
    assert cut["error"]["kind"] == "interrupted", cut


def _check_workflows(database_url: str, left_running: list[str]) -> None:
    """DBOS's own record: the workflows the old worker left running ended in success, and
    none ended in error (a session row may say completed while its workflow failed after
    it, for instance publishing the outcome)."""
    dbos = DBOSClient(system_database_url=database_url)
    try:
        workflows = dbos.list_workflows(load_input=False, load_output=False)
    finally:
        dbos.destroy()
    assert workflows, "DBOS recorded no workflow"
    failed = [(w.workflow_id, w.name, w.status) for w in workflows if w.status in FAILED_WORKFLOW]
    assert failed == []
    status = {w.workflow_id: w.status for w in workflows}
    assert {w: status.get(w) for w in left_running} == dict.fromkeys(left_running, "SUCCESS")
