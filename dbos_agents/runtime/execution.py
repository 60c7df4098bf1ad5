"""What one execution of a session workflow knows about itself, in a context variable.

**Fresh steps.** A workflow's steps run in order, and a step is checkpointed before the next
one starts. So once any step body of this execution has run (rather than replayed its
checkpoint), every later step is running for the first time ever: no earlier execution got
that far, or this one would have replayed the step that ran. The model step uses that to
skip its "was this turn recorded by an earlier execution?" read, and a server tool's
operation its "was this call recorded?" read, in the common case.

**Tool checkpoints.** ``dbos_agents.session.v1`` runs each server tool as a DBOS step;
``session.v2`` runs it as a plain operation whose replay is the result row in the ledger
(``steps.tool_op``). v1 stays registered so workflows started before an upgrade recover on
the step sequence they were started with.

The state is one mutable cell per workflow execution, set on entry by the workflow; steps
(and the concurrent tool calls' tasks, which copy the context) see the same cell.
"""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass
class _Execution:
    tool_checkpoints: bool
    ran: bool = False


_current: ContextVar[_Execution | None] = ContextVar("dbos_agents_execution", default=None)


def begin_execution(*, tool_checkpoints: bool) -> None:
    """Called first thing by the workflow body: nothing has run in this execution yet."""
    _current.set(_Execution(tool_checkpoints=tool_checkpoints))


def step_ran() -> None:
    """Called by a step body that runs (a replayed step's body never does)."""
    cell = _current.get()
    if cell is not None:
        cell.ran = True


def later_steps_are_new() -> bool:
    """True once a step body ran in this execution (see the module doc)."""
    cell = _current.get()
    return cell is not None and cell.ran


def tool_checkpoints() -> bool:
    """Whether server tools run as DBOS steps in this execution (``session.v1``)."""
    cell = _current.get()
    return cell is None or cell.tool_checkpoints
