"""Worker settings that invite adopting a live or draining worker are refused at startup."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from dbos_agents.errors import ConfigurationError
from dbos_agents.settings import Settings
from dbos_agents.store.workers import PeerBeat
from dbos_agents.worker.presence import Observer


def _settings(hb: float, stale: float, grace: float) -> Settings:
    return Settings(heartbeat_interval_sec=hb, stale_after_sec=stale, shutdown_grace_sec=grace)


@pytest.mark.parametrize(
    ("hb", "stale", "grace"),
    [(5.0, 30.0, 10.0), (0.5, 3.0, 1.0), (0.5, 8.0, 5.0), (1.0, 3.0, 0.0)],
)
def test_safe_settings_pass(hb: float, stale: float, grace: float) -> None:
    _settings(hb, stale, grace).check_worker()


def test_the_defaults_pass() -> None:
    Settings().check_worker()


@pytest.mark.parametrize(
    ("hb", "stale", "grace", "says"),
    [
        (5.0, 10.0, 10.0, "shutdown_grace_sec"),  # grace >= stale
        (5.0, 30.0, 25.0, "shutdown_grace_sec"),  # grace + 2 beats reaches stale
        (5.0, 12.0, 1.0, "at least 3 x heartbeat_interval_sec"),  # too few beats per window
        (0.0, 30.0, 10.0, "heartbeat_interval_sec must be positive"),
        (5.0, 30.0, -1.0, "must not be negative"),
    ],
)
def test_unsafe_settings_are_refused(hb: float, stale: float, grace: float, says: str) -> None:
    with pytest.raises(ConfigurationError, match=says) as info:
        _settings(hb, stale, grace).check_worker()
    assert info.value.code == "INVALID_CONFIGURATION"


def test_the_worker_refuses_before_touching_the_database(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import asyncio

    from dbos_agents.worker import serve_forever
    from tests.crash.ops_app import runtime

    rt = runtime()
    rt.settings = _settings(5.0, 10.0, 10.0).model_copy(
        update={"database_url": "postgresql://nobody@127.0.0.1:1/none"}
    )
    with pytest.raises(ConfigurationError, match="a draining worker could be adopted"):
        asyncio.run(serve_forever(rt, exit_process=False))


def _beat(eid: str, n: int, inst: str = "i1") -> PeerBeat:
    return PeerBeat(eid, inst, n)


def test_silence_counts_only_while_watched_without_gaps() -> None:
    obs = Observer(stale_after_sec=3.0, interval_sec=0.5)
    assert obs.observe([_beat("a", 1)], 0.0) == []  # first look: nothing watched yet
    for t in (0.5, 1.0, 1.5, 2.0, 2.5):
        assert obs.observe([_beat("a", 1)], t) == []
    assert obs.observe([_beat("a", 1)], 3.0) == [_beat("a", 1)]


def _watch(obs: Observer, row: PeerBeat, start: float, end: float) -> list[PeerBeat]:
    """Tick every 0.5 s from ``start`` to ``end``; the last tick's answer."""
    t, found = start, []
    while t <= end + 1e-9:
        found = obs.observe([row], t)
        t += 0.5
    return found


def test_a_moving_beat_or_new_instance_restarts_the_clock() -> None:
    obs = Observer(stale_after_sec=3.0, interval_sec=0.5)
    assert _watch(obs, _beat("a", 1), 0.0, 2.5) == []
    assert _watch(obs, _beat("a", 2), 3.0, 5.5) == []  # it beat at 3.0
    assert _watch(obs, _beat("a", 2, inst="i2"), 6.0, 8.5) == []  # restarted process
    assert obs.observe([_beat("a", 2, inst="i2")], 9.0) == [_beat("a", 2, inst="i2")]


def test_an_observer_gap_or_failure_resets_everything() -> None:
    obs = Observer(stale_after_sec=3.0, interval_sec=0.5)
    assert _watch(obs, _beat("a", 1), 0.0, 2.5) == []
    # The adopter itself stalled (or was disconnected) for 10 s: its watch proves nothing.
    assert _watch(obs, _beat("a", 1), 12.5, 15.0) == []
    assert obs.observe([_beat("a", 1)], 15.5) == [_beat("a", 1)]
    obs.broken()  # a failed tick
    assert _watch(obs, _beat("a", 1), 16.0, 18.5) == []
    assert obs.observe([_beat("a", 1)], 19.0) == [_beat("a", 1)]


def test_connection_bound_follows_the_pool_settings() -> None:
    assert Settings().max_database_connections() == 20 + 1 + 5 + 10 + 20 + 5 + 10 + 4
    more = Settings(system_db_pool_size=30, db_pool_size=4, db_max_overflow=0)
    assert more.max_database_connections() == 30 + 1 + 5 + 4 + 0 + 5 + 10 + 4


def test_the_queue_poll_is_slow_unless_it_claims_every_start() -> None:
    assert Settings().queue_poll_sec() == 1.0  # starts are claimed on NOTIFY
    assert Settings(worker_concurrency=4).queue_poll_sec() == 0.2  # only the poll claims
    assert Settings(queue_polling_interval_sec=0.05).queue_poll_sec() == 0.05


def test_parking_is_off_under_a_worker_concurrency_limit() -> None:
    # A resume starts its workflow directly, past the queue's limit.
    assert Settings().park_after() == 30.0
    assert Settings(park_after_sec=None).park_after() is None
    assert Settings(worker_concurrency=4).park_after() is None
    with pytest.raises(ValidationError):
        Settings(park_after_sec=0)
