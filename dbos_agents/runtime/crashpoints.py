"""Named crash points: where the crash harness SIGKILLs a real worker.

``DBOS_AGENTS_CRASH_AT=<point>`` (optionally ``<point>:<n>`` for the n-th hit) arms one point
in a worker process; reaching it kills the process with SIGKILL, exactly as ``kill -9`` would.
The variable is read once at import; an unarmed point costs one comparison.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Final, Literal

CrashPoint = Literal[
    "model_call",  # inside the model step, after the provider answered, before its checkpoint
    "after_model_step",  # model output checkpointed, before write #1
    "after_record",  # write #1 committed (ledger 'requested'), before dispatch
    "after_dispatch_mark",  # ledger 'dispatched' committed, before the handler runs
    "after_handler",  # handler returned, before the tool step's checkpoint
    "after_tool_steps",  # every tool step checkpointed, before write #2
    "after_results",  # write #2 committed
]
CRASH_POINTS: Final[tuple[str, ...]] = CrashPoint.__args__  # type: ignore[attr-defined]
ENV_VAR: Final = "DBOS_AGENTS_CRASH_AT"


def _parse(value: str | None) -> tuple[str | None, int]:
    if not value:
        return None, 0
    name, _, nth = value.partition(":")
    if name not in CRASH_POINTS:
        raise ValueError(f"{ENV_VAR}={value!r}: unknown crash point; known: {CRASH_POINTS}")
    hit = int(nth or 1)
    if hit < 1:
        raise ValueError(f"{ENV_VAR}={value!r}: the hit number must be 1 or more")
    return name, hit


_armed, _nth = _parse(os.environ.get(ENV_VAR))
_hits = 0
_lock = threading.Lock()


def crash_point(name: CrashPoint) -> None:
    """SIGKILL this process if ``name`` is the armed point and this is the chosen hit."""
    global _hits
    if _armed != name:
        return
    with _lock:
        _hits += 1
        if _hits != _nth:
            return
    sys.stderr.write(f"dbos-agents: crash point {name!r} reached, SIGKILL\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
