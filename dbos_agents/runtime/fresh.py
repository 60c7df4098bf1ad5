"""Whether this execution of a session workflow has run a step body for real yet.

A workflow's steps run in order, and a step is checkpointed before the next one starts.
So once any step body of this execution has run (rather than replayed its checkpoint),
every later step is running for the first time ever: no earlier execution got that far,
or this one would have replayed the step that ran. The model step uses that to skip its
"was this turn recorded by an earlier execution?" read in the common case.

The state is one mutable cell per workflow execution, in a context variable that the
workflow sets on entry; steps (and the concurrent tool steps' tasks, which copy the
context) see the same cell.
"""

from __future__ import annotations

from contextvars import ContextVar

_ran: ContextVar[list[bool] | None] = ContextVar("dbos_agents_fresh", default=None)


def begin_execution() -> None:
    """Called first thing by the workflow body: nothing has run in this execution yet."""
    _ran.set([False])


def step_ran() -> None:
    """Called by a step body that runs (a replayed step's body never does)."""
    cell = _ran.get()
    if cell is not None:
        cell[0] = True


def later_steps_are_new() -> bool:
    """True once a step body ran in this execution (see the module doc)."""
    cell = _ran.get()
    return cell is not None and cell[0]
