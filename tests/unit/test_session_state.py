"""Typed session state without a database: definitions, validation, the fold."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, Field

from dbos_agents import Agent, DefinitionError, StateValidationError, ToolContext
from dbos_agents.state import StateChanges, StateSchema, validate


class Cart(BaseModel):
    items: list[str] = []
    total: int = Field(default=0, ge=0)


class NeedsArgs(BaseModel):
    name: str


def test_state_must_be_a_model_buildable_with_no_arguments() -> None:
    with pytest.raises(DefinitionError, match="BaseModel subclass"):
        Agent("a", state=dict)  # type: ignore[arg-type]
    with pytest.raises(DefinitionError, match="buildable with no arguments"):
        Agent("a", state=NeedsArgs)
    with pytest.raises(DefinitionError, match="migrate_state needs state"):
        Agent("a", migrate_state=lambda d: d)
    with pytest.raises(DefinitionError, match="instructions must be"):
        Agent("a", instructions=3)  # type: ignore[arg-type]
    agent = Agent("a", instructions=lambda s: f"{len(s.items)} items", state=Cart)
    assert agent.instructions == "" and agent.instructions_fn is not None
    assert agent.state_schema == StateSchema(Cart)


def _ctx(base: Any = None) -> ToolContext:
    changes = StateChanges(StateSchema(Cart), "s1", base)
    return ToolContext("s1", "s1", "c1", "t", "k", changes=changes)


@pytest.mark.asyncio
async def test_a_tool_reads_and_changes_its_view() -> None:
    ctx = _ctx({"items": ["a"], "total": 1})
    assert ctx.state == Cart(items=["a"], total=1)
    new = await ctx.update_state(lambda c: Cart(items=[*c.items, "b"], total=c.total + 2))
    assert ctx.state == new == Cart(items=["a", "b"], total=3)
    ctx.state = {"items": [], "total": 5}
    replaced: object = ctx.state
    assert replaced == Cart(total=5)
    with pytest.raises(StateValidationError) as caught:
        ctx.state = Cart.model_construct(items=[], total=-1)  # built without validation
    assert caught.value.field == "total" and caught.value.session_id == "s1"
    assert ctx.state == Cart(total=5)  # the refused change left nothing
    assert ctx.changes is not None and len(ctx.changes.ops) == 2
    with pytest.raises(AttributeError):
        ctx.session_id = "other"


def test_the_fold_applies_updates_to_the_latest_and_replacements_as_given() -> None:
    ctx = _ctx()
    assert ctx.changes is not None
    ctx.changes.update(lambda c: Cart(items=[*c.items, "x"], total=c.total + 1))
    # another call committed meanwhile: the update runs again on what is there now
    assert ctx.changes.fold({"items": ["y"], "total": 4}) == {"items": ["y", "x"], "total": 5}
    # folding twice (a retried commit) gives the same state
    assert ctx.changes.fold({"items": ["y"], "total": 4}) == {"items": ["y", "x"], "total": 5}
    ctx.changes.replace(Cart(items=["z"]))
    assert ctx.changes.fold({"items": ["y"], "total": 4}) == {"items": ["z"], "total": 0}


def test_a_fold_that_no_longer_validates_raises() -> None:
    ctx = _ctx({"total": 10})
    assert ctx.changes is not None
    ctx.changes.update(lambda c: c.model_copy(update={"total": c.total - 8}))
    with pytest.raises(StateValidationError, match="total"):
        ctx.changes.fold({"total": 3})


def test_old_states_need_a_migration() -> None:
    def upgrade(old: dict[str, Any]) -> dict[str, Any]:
        return {"items": old["items"].split(","), "total": 0}

    with pytest.raises(StateValidationError) as caught:
        validate(Cart, "s9", {"items": "a,b"})
    assert (caught.value.session_id, caught.value.field) == ("s9", "items")
    assert "s9" in str(caught.value) and "items" in str(caught.value)
    assert validate(Cart, "s9", {"items": "a,b"}, upgrade) == Cart(items=["a", "b"])
    assert validate(Cart, "s9", None) == Cart()


def test_a_context_without_state() -> None:
    ctx = ToolContext("s", "s", "c", "t", "k")
    assert ctx.state is None
    with pytest.raises(TypeError, match="no state"):
        ctx.state = Cart()
