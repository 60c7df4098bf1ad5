"""Which starts the fleet's published agents refuse (``store.workers.Fleet.refusal``)."""

from __future__ import annotations

from typing import Literal

import pytest

from dbos_agents import AgentUnavailableError, UnknownAgentError
from dbos_agents.ids import agent_queue
from dbos_agents.store.workers import Fleet

LIVE_AND_DOWN = Fleet(live=frozenset({"shop"}), ever=frozenset({"shop", "desk"}))


@pytest.mark.parametrize("when", ["queue", "refuse"])
def test_a_served_agent_starts_and_a_never_served_one_is_unknown(
    when: Literal["queue", "refuse"],
) -> None:
    assert LIVE_AND_DOWN.refusal("shop", when) is None
    refused = LIVE_AND_DOWN.refusal("typo", when)
    assert isinstance(refused, UnknownAgentError) and refused.known == ["desk", "shop"]


def test_an_agent_whose_workers_are_down_queues_unless_refused_by_setting() -> None:
    assert LIVE_AND_DOWN.refusal("desk", "queue") is None
    refused = LIVE_AND_DOWN.refusal("desk", "refuse")
    assert isinstance(refused, AgentUnavailableError) and refused.code == "AGENT_UNAVAILABLE"


def test_before_any_worker_published_nothing_is_refused() -> None:
    empty = Fleet(frozenset(), frozenset())
    assert empty.refusal("anything", "refuse") is None


def test_each_agent_has_its_own_queue_under_the_prefix() -> None:
    assert agent_queue("dbos_agents", "shop") == "dbos_agents:shop"
    assert agent_queue("dbos_agents", "shop") != agent_queue("dbos_agents", "desk")
