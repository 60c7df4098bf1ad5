"""Typed session state: an agent's pydantic model, bound to the JSON a session stores.

``Agent(state=Model)`` gives every session of the agent a state, ``Model()`` until a tool
changes it. Tools change it through their ``ToolContext`` (``ctx.state = new`` or
``await ctx.update_state(fn)``); the changes are kept as operations (``StateChanges``)
and applied again, at the commit of the call's result, to the latest committed state
under the session's lock: two tools running side by side each see their own update land,
and a change that no longer validates there becomes the call's tool error. Plain data and
pydantic only: no database here (``store/state.py`` writes the rows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from . import storable
from .errors import StateValidationError
from .messages import JSONValue

MigrateState = Callable[[dict[str, JSONValue]], dict[str, JSONValue]]
"""Upgrades a stored state that no longer validates (old JSON in, new JSON out)."""


def check_model(model: object, migrate: object) -> list[str]:
    """Problems with ``Agent(state=..., migrate_state=...)`` (empty when fine)."""
    problems: list[str] = []
    if migrate is not None and not callable(migrate):
        problems.append(f"migrate_state must be a function, got {migrate!r}")
    if model is None:
        if migrate is not None:
            problems.append("migrate_state needs state=<a pydantic model>")
        return problems
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return [*problems, f"state must be a pydantic BaseModel subclass, got {model!r}"]
    try:
        model().model_dump(mode="json")
    except Exception as exc:
        problems.append(
            f"state model {model.__name__} must be buildable with no arguments "
            f"(give every field a default): {type(exc).__name__}: {exc}"
        )
    return problems


def _invalid(session_id: str, exc: ValidationError) -> StateValidationError:
    first = exc.errors()[0] if exc.errors() else None
    if first is None:
        return StateValidationError(session_id, "", str(exc))
    path = ".".join(str(p) for p in first["loc"])
    return StateValidationError(session_id, path, first["msg"])


def validate(
    model: type[BaseModel],
    session_id: str,
    raw: JSONValue | None,
    migrate: MigrateState | None = None,
) -> BaseModel:
    """The stored JSON as the model: ``None`` (never changed) is ``model()``; JSON that no
    longer validates goes through ``migrate`` first, if there is one. Raises
    ``StateValidationError`` naming the session and the first failing field."""
    if raw is None:
        return model()
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        if migrate is None or not isinstance(raw, dict):
            raise _invalid(session_id, exc) from None
    try:
        upgraded = migrate(dict(raw))
    except Exception as exc:
        raise StateValidationError(
            session_id, "", f"migrate_state raised {type(exc).__name__}: {exc}"
        ) from exc
    try:
        return model.model_validate(upgraded)
    except ValidationError as exc:
        raise _invalid(session_id, exc) from None


def dump(value: BaseModel) -> dict[str, JSONValue]:
    """The state as the JSON stored (repaired where Postgres cannot hold a value)."""
    out: dict[str, JSONValue] = storable.value(value.model_dump(mode="json"))
    return out


@dataclass(frozen=True)
class StateSchema:
    """An agent's state model and its optional upgrade of old states."""

    model: type[BaseModel]
    migrate: MigrateState | None = None

    def load(self, session_id: str, raw: JSONValue | None) -> BaseModel:
        return validate(self.model, session_id, raw, self.migrate)

    def coerce(self, session_id: str, value: object) -> BaseModel:
        """A tool's new state, validated afresh (a model instance may have been changed
        in place without validation, or be another model's): a full round trip."""
        raw = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
        try:
            return self.model.model_validate(raw)
        except ValidationError as exc:
            raise _invalid(session_id, exc) from None


@dataclass
class _Op:
    replace: BaseModel | None = None
    update: Callable[[Any], Any] | None = None


@dataclass
class StateChanges:
    """One tool call's view of the state and the changes it made, in order.

    ``base`` is the latest committed state when the call was dispatched (read with its
    dispatch mark, no extra round trip); it is validated on first use, so a tool that
    never reads the state is not failed by an old one."""

    schema: StateSchema
    session_id: str
    base: JSONValue | None
    ops: list[_Op] = field(default_factory=list)
    _current: BaseModel | None = None

    @property
    def current(self) -> BaseModel:
        if self._current is None:
            self._current = self.schema.load(self.session_id, self.base)
        return self._current

    def replace(self, value: object) -> BaseModel:
        new = self.schema.coerce(self.session_id, value)
        self.ops.append(_Op(replace=new))
        self._current = new
        return new

    def update(self, fn: Callable[[Any], Any]) -> BaseModel:
        if not callable(fn):
            raise TypeError(f"update_state takes a function of the state, got {fn!r}")
        new = self.schema.coerce(self.session_id, fn(self.current.model_copy(deep=True)))
        self.ops.append(_Op(update=fn))
        self._current = new
        return new

    def fold(self, latest: JSONValue | None) -> dict[str, JSONValue]:
        """The changes applied again to the latest committed state (the session's lock is
        held): a replacement replaces, an update function runs on what is there now.
        Raises ``StateValidationError``; any other error of an update function too."""
        value = self.schema.load(self.session_id, latest)
        for op in self.ops:
            if op.replace is not None:  # a copy: an update may change it in place, and a
                value = op.replace.model_copy(deep=True)  # retried commit folds again
            else:
                assert op.update is not None
                value = self.schema.coerce(self.session_id, op.update(value))
        return dump(value)
