"""Named crash points: where the crash harness SIGKILLs (or SIGTERMs) a real worker.

``DBOS_AGENTS_CRASH_AT=<point>`` (optionally ``<point>:<n>`` for the n-th hit) arms one point
in a worker process; reaching it kills the process with SIGKILL, exactly as ``kill -9`` would.
With ``DBOS_AGENTS_CRASH_SIGNAL=SIGTERM`` the process sends itself SIGTERM there instead and
carries on, as a deploy would stop it mid-step. ``DBOS_AGENTS_CRASH_SESSION=<session id>``
narrows the point to that session's workflows (its runs and sub-agents): a worker that
recovers another session first replays it through the same points, and must not die there.
The variables are read once at import; an unarmed point costs one comparison.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Final, Literal

CrashPoint = Literal[
    "model_answered",  # in the model turn: the provider answered, the turn is not recorded
    "model_call",  # in the model turn: the turn is recorded, the turn not yet returned
    "after_model_step",  # the model turn returned (its turn and the previous results recorded)
    "after_dispatch_mark",  # ledger 'dispatched' committed, before the handler runs
    "after_handler",  # handler returned, before its result row commits
    "after_tool_result",  # result row committed, before the tool step's checkpoint
    "after_tool_steps",  # every call of the turn done, before the next model turn
    "after_run_end",  # the run's end committed, its outcome not yet published
]
InnerStepPoint = Literal[
    "inner_step_marked",  # a durable tool's inner step marked 'dispatched', fn not yet run
    "inner_step_ran",  # the inner step's function returned, its outcome not yet recorded
    "inner_step_recorded",  # the inner step's outcome committed, not yet returned
]
CRASH_POINTS: Final[tuple[str, ...]] = CrashPoint.__args__  # type: ignore[attr-defined]
"""The windows of a session's run (every session passes each of them)."""
INNER_STEP_POINTS: Final[tuple[str, ...]] = InnerStepPoint.__args__  # type: ignore[attr-defined]
"""The windows of a durable tool's inner step (only sessions that run one pass them)."""
ALL_POINTS: Final[tuple[str, ...]] = CRASH_POINTS + INNER_STEP_POINTS
ENV_VAR: Final = "DBOS_AGENTS_CRASH_AT"
SIGNAL_ENV_VAR: Final = "DBOS_AGENTS_CRASH_SIGNAL"
SESSION_ENV_VAR: Final = "DBOS_AGENTS_CRASH_SESSION"


def _parse(value: str | None) -> tuple[str | None, int]:
    if not value:
        return None, 0
    name, _, nth = value.partition(":")
    if name not in ALL_POINTS:
        raise ValueError(f"{ENV_VAR}={value!r}: unknown crash point; known: {ALL_POINTS}")
    hit = int(nth or 1)
    if hit < 1:
        raise ValueError(f"{ENV_VAR}={value!r}: the hit number must be 1 or more")
    return name, hit


def _signal(value: str | None) -> signal.Signals:
    if not value:
        return signal.SIGKILL
    try:
        return signal.Signals[
            value.upper() if value.upper().startswith("SIG") else "SIG" + value.upper()
        ]
    except KeyError:
        raise ValueError(f"{SIGNAL_ENV_VAR}={value!r}: not a signal name") from None


_armed, _nth = _parse(os.environ.get(ENV_VAR))
_signal_to_send = _signal(os.environ.get(SIGNAL_ENV_VAR))
_session = os.environ.get(SESSION_ENV_VAR) or None
_hits = 0
_lock = threading.Lock()


def crash_point(name: CrashPoint | InnerStepPoint) -> None:
    """Signal this process if ``name`` is the armed point and this is the chosen hit
    (SIGKILL by default: nothing after this line runs)."""
    global _hits
    if _armed != name or not _in_session():
        return
    with _lock:
        _hits += 1
        if _hits != _nth:
            return
    sys.stderr.write(f"dbos-agents: crash point {name!r} reached, {_signal_to_send.name}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), _signal_to_send)


def _in_session() -> bool:
    """Whether this code runs for the armed session (always, when none is armed)."""
    if _session is None:
        return True
    from dbos import DBOS

    wf = DBOS.workflow_id
    return wf is not None and (wf == _session or wf.startswith(_session + "::"))
