"""One exception hierarchy for dbos-agents; every error carries a stable ``code``.

::

    DbosAgentsError
    ├── DefinitionError            an Agent, tool or model is defined wrongly (raised at definition time)
    ├── ConfigurationError         settings that cannot work (bad URL, missing option)
    │   ├── DatabaseUnavailableError   the database does not answer (names the host)
    │   └── UnsupportedDBOSError       the installed dbos is outside the reviewed range
    ├── UnknownAgentError          start() names an agent no worker runs or has run
    ├── AgentUnavailableError      start() names an agent whose workers are all down (refused by setting)
    ├── SessionNotFoundError       no session with that id
    ├── SessionBusyError           a message was sent to a session whose run is still going
    ├── TurnNotFoundError          history or fork at a turn the session does not have
    ├── AccessDeniedError          a scoped client acted on another user's or tenant's session
    ├── RuntimeNotLaunchedError    a worker-side call before AgentRuntime.launch()
    ├── InterruptFailedError       an interrupt could not be applied; nothing was changed
    ├── StateValidationError       a session's state does not validate (names session and field)
    ├── DurableToolError           raised inside a durable tool's body (``@tool(durable=True)``)
    │   ├── StepOutcomeUnknownError    a side-effecting inner step may have run before a crash
    │   ├── StepFailedError            an inner step raised (now, or when it first ran)
    │   ├── AskTimeoutError            nobody answered ``ctx.ask`` before its deadline
    │   ├── NotJSONError               a checkpoint or an inner step's output is not JSON
    │   └── NondeterministicToolError  a re-executed body started other steps than before
    ├── MCPServerError             an MCP server did not answer or answered unreadably (names server and tool)
    ├── InvalidRequestError        a submit that cannot apply (wrong kind, malformed body)
    │   ├── InvalidResultError     the result fails the client tool's output schema
    │   └── NotRootSessionError    submits go to the root session; names the root
    └── ModelError                 the model provider failed for good (not retried further)
        └── TransientModelError    a provider failure worth retrying (429, 5xx, timeout)

Model-visible failures (a tool raised, arguments failed the schema, a side effect's outcome
is unknown after a crash) are *not* exceptions: they become tool results the model reads.
``ToolDurabilityError`` is the name of that result kind (see ``dbos_agents.results``).
"""

from __future__ import annotations


class DbosAgentsError(Exception):
    """Base of every error raised by dbos-agents."""

    code: str = "DBOS_AGENTS_ERROR"


class DefinitionError(DbosAgentsError, ValueError):
    """An Agent, tool or model definition is invalid; the message names every problem."""

    code = "INVALID_DEFINITION"

    def __init__(self, subject: str, problems: list[str]) -> None:
        self.subject = subject
        self.problems = problems
        super().__init__(f"invalid {subject}: " + "; ".join(problems))

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.subject, self.problems))


class ConfigurationError(DbosAgentsError):
    """Settings that cannot work."""

    code = "INVALID_CONFIGURATION"


class DatabaseUnavailableError(ConfigurationError):
    """The configured Postgres does not answer; raised fast, before DBOS launches."""

    code = "DATABASE_UNAVAILABLE"


class UnsupportedDBOSError(ConfigurationError):
    """The installed dbos release is not one whose internals dbos-agents' fast paths were
    reviewed against; the message names the installed and the reviewed versions."""

    code = "UNSUPPORTED_DBOS"


class UnknownAgentError(DbosAgentsError, LookupError):
    """The runtime has no agent by that name."""

    code = "UNKNOWN_AGENT"

    def __init__(self, name: str, known: list[str]) -> None:
        self.name = name
        self.known = known
        # The message reaches clients (HTTP 404, a run's error): it names no other agent.
        # ``known`` is there for the developer who caught it in process.
        super().__init__(f"unknown agent {name!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.name, self.known))


class AgentUnavailableError(DbosAgentsError):
    """Every worker that runs the agent is down, and ``Settings.start_when_no_worker`` is
    ``refuse`` (by default the run is queued until one comes up)."""

    code = "AGENT_UNAVAILABLE"

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no live worker runs agent {name!r}; try again later")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.name,))


class SessionNotFoundError(DbosAgentsError, LookupError):
    """No session with that id."""

    code = "SESSION_NOT_FOUND"

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        super().__init__(f"no session {session_id!r}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id,))


class SessionBusyError(DbosAgentsError):
    """The session is still running a turn; send the next message when it has finished."""

    code = "SESSION_BUSY"

    def __init__(self, session_id: str, status: str) -> None:
        self.session_id = session_id
        self.status = status
        super().__init__(f"session {session_id!r} is {status}; wait for it to finish")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id, self.status))


class TurnNotFoundError(DbosAgentsError, LookupError):
    """``history``/``fork`` named a turn the session does not have (turns count the
    session's assistant messages from 1; ``turns`` is how many it has). Nothing was
    created."""

    code = "TURN_NOT_FOUND"

    def __init__(self, session_id: str, turn: int, turns: int) -> None:
        self.session_id = session_id
        self.turn = turn
        self.turns = turns
        super().__init__(
            f"session {session_id!r} has no turn {turn} (it has turns 1 to {turns})"
            if turns
            else f"session {session_id!r} has no turn {turn} (it has no turn yet)"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id, self.turn, self.turns))


class AccessDeniedError(DbosAgentsError, PermissionError):
    """A client scoped to one user (and tenant) acted on a session of another, or on
    something outside its scope (``detail`` says what); nothing was read or changed."""

    code = "ACCESS_DENIED"

    def __init__(self, session_id: str | None, detail: str | None = None) -> None:
        self.session_id = session_id
        self.detail = detail
        super().__init__(detail or f"session {session_id!r} belongs to another user or tenant")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id, self.detail))


class RuntimeNotLaunchedError(DbosAgentsError):
    """A worker-side call was made before ``AgentRuntime.launch()``."""

    code = "RUNTIME_NOT_LAUNCHED"


class InterruptFailedError(DbosAgentsError):
    """An interrupt could not be applied (for example the database went away mid-way).
    It is all or nothing: the session, its waits and its workflows are unchanged."""

    code = "INTERRUPT_FAILED"

    def __init__(self, session_id: str, reason: str) -> None:
        self.session_id = session_id
        self.reason = reason
        super().__init__(f"could not interrupt session {session_id!r}, nothing changed: {reason}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id, self.reason))


class StateValidationError(DbosAgentsError, ValueError):
    """A session's state does not validate against the agent's state model: a stored state
    written under an older model (and no ``migrate_state`` upgrades it), or a tool's change
    (the model then reads it as a tool error, and nothing is stored). ``field`` is the
    first failing field's path ("" when the state as a whole is wrong)."""

    code = "INVALID_STATE"

    def __init__(self, session_id: str, field: str, detail: str) -> None:
        self.session_id = session_id
        self.field = field
        self.detail = detail
        where = f"field {field!r}" if field else "the state"
        super().__init__(f"state of session {session_id!r} does not validate: {where}: {detail}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id, self.field, self.detail))


class DurableToolError(DbosAgentsError):
    """Raised inside a durable tool's body. One that escapes the body becomes the call's
    tool error, which the model reads (an unknown outcome: a durability error)."""

    code = "DURABLE_TOOL_ERROR"


class StepOutcomeUnknownError(DurableToolError):
    """A side-effecting inner step was started by an earlier execution that did not record
    its outcome (a crash mid-step): it is not run again. Settle it (look the effect up,
    with ``idempotency_key``) or let it propagate."""

    code = "STEP_OUTCOME_UNKNOWN"

    def __init__(self, step: str, seq: int, idempotency_key: str) -> None:
        self.step = step
        self.seq = seq
        self.idempotency_key = idempotency_key
        super().__init__(
            f"inner step {step!r} (#{seq}) may have run before a crash and is not run again:"
            f" its outcome is unknown (idempotency key {idempotency_key})"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.step, self.seq, self.idempotency_key))


class StepFailedError(DurableToolError):
    """An inner step raised. Recorded like an output: a re-executed body gets the same
    error (``error_type`` is the original exception's class name; the original is the
    ``__cause__`` when it was raised in this execution)."""

    code = "STEP_FAILED"

    def __init__(self, step: str, error_type: str, detail: str) -> None:
        self.step = step
        self.error_type = error_type
        self.detail = detail
        super().__init__(f"inner step {step!r} failed: {error_type}: {detail}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.step, self.error_type, self.detail))


class AskTimeoutError(DurableToolError, TimeoutError):
    """``ctx.ask`` got no answer before its deadline (the wait is closed)."""

    code = "ASK_TIMEOUT"

    def __init__(self, tool: str, ask_id: str, timeout_sec: float) -> None:
        self.tool = tool
        self.ask_id = ask_id
        self.timeout_sec = timeout_sec
        super().__init__(
            f"no answer to {tool!r} (wait {ask_id}) arrived within {timeout_sec} seconds"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.tool, self.ask_id, self.timeout_sec))


class NotJSONError(DurableToolError, TypeError):
    """A value a durable tool records (a checkpoint, an inner step's output) is not JSON;
    ``path`` names the first offending place (``$`` is the value itself)."""

    code = "NOT_JSON"

    def __init__(self, what: str, path: str, detail: str) -> None:
        self.what = what
        self.path = path
        self.detail = detail
        super().__init__(f"{what} is not JSON at {path}: {detail}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.what, self.path, self.detail))


class NondeterministicToolError(DurableToolError):
    """A re-executed durable tool body started a different inner step at a position an
    earlier execution recorded: the body must start its steps in the same order."""

    code = "NONDETERMINISTIC_TOOL"

    def __init__(self, seq: int, recorded: str, started: str) -> None:
        self.seq = seq
        self.recorded = recorded
        self.started = started
        super().__init__(
            f"inner step #{seq} was {recorded!r} when first run, now {started!r}: a durable"
            " tool must start the same steps in the same order on every execution"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.seq, self.recorded, self.started))


class MCPServerError(DbosAgentsError):
    """An MCP server could not be reached or gave an answer we cannot read. Inside a run it
    becomes the call's tool error (the model reads it); ``dbos-agents mcp tools`` prints it.
    """

    code = "MCP_SERVER_ERROR"

    def __init__(self, server: str, detail: str, tool: str | None = None) -> None:
        self.server = server
        self.detail = detail
        self.tool = tool
        where = f"MCP server {server!r}" + (f" (tool {tool!r})" if tool else "")
        super().__init__(f"{where}: {detail}")

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.server, self.detail, self.tool))


class ModelError(DbosAgentsError):
    """The model provider failed in a way retrying will not fix."""

    code = "MODEL_ERROR"


class TransientModelError(ModelError):
    """A provider failure worth retrying with backoff (rate limit, 5xx, timeout).
    ``retry_after``: the seconds the provider asked to wait (its ``retry-after``), which
    the model turn waits at least, up to ``Settings.model_retry_after_max_sec``; ``None``
    when it asked for nothing."""

    code = "MODEL_TRANSIENT"

    def __init__(self, *args: object, retry_after: float | None = None) -> None:
        super().__init__(*args)
        self.retry_after = retry_after  # an attribute: pickling keeps it (``__dict__``)


class InvalidRequestError(DbosAgentsError, ValueError):
    """A submit that cannot apply: wrong kind for the pending call, or a malformed body."""

    code = "INVALID_REQUEST"


class InvalidResultError(InvalidRequestError):
    """A submitted result fails the client tool's output schema; nothing was changed."""

    code = "INVALID_RESULT"

    def __init__(self, message: str, errors: list[dict[str, object]]) -> None:
        self.errors = errors
        super().__init__(message)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (str(self), self.errors))


class NotRootSessionError(InvalidRequestError):
    """Submits address the root session; this id belongs to a sub-agent's session."""

    code = "NOT_ROOT_SESSION"

    def __init__(self, session_id: str, root_session_id: str) -> None:
        self.session_id = session_id
        self.root_session_id = root_session_id
        super().__init__(
            f"session {session_id!r} is a sub-agent session; submit against its root "
            f"session {root_session_id!r}"
        )

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.session_id, self.root_session_id))
