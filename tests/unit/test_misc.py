"""Identifiers, crash points, the witness log, database URLs, migrations and settings."""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest

from dbos_agents import ConfigurationError, Settings
from dbos_agents.ids import idempotency_key, new_session_id, run_workflow_id
from dbos_agents.loop import crashpoints
from dbos_agents.store import migrate as migrate_module
from dbos_agents.store.db import describe, parse_url, sqlalchemy_url
from dbos_agents.store.migrate import load_migrations
from dbos_agents.testing.witness import Witness

# --- ids -----------------------------------------------------------------------------------


def test_idempotency_key_is_stable() -> None:
    assert idempotency_key("ses_1", "call_1_1") == idempotency_key("ses_1", "call_1_1")


def test_idempotency_key_pinned_value() -> None:
    # Providers deduplicate on this value across deploys: it must never change.
    digest = hashlib.sha256(b"ses_1\x00call_1_1").hexdigest()
    assert idempotency_key("ses_1", "call_1_1") == "dbosag_" + digest[:40]


def test_idempotency_key_is_distinct_per_session_and_call() -> None:
    keys = {
        idempotency_key(s, c)
        for s in ("ses_1", "ses_2", "ses_10")
        for c in ("call_1_1", "call_1_2", "call_2_1")
    }
    assert len(keys) == 9


def test_idempotency_key_does_not_collide_on_concatenation() -> None:
    assert idempotency_key("ab", "c") != idempotency_key("a", "bc")


def test_idempotency_key_is_short_and_opaque() -> None:
    key = idempotency_key("ses_" + "x" * 200, "call_" + "y" * 200)
    assert len(key) <= 64
    assert re.fullmatch(r"dbosag_[0-9a-f]{40}", key)
    assert "ses_" not in key


def test_run_workflow_id() -> None:
    assert run_workflow_id("ses_abc", 1) == "ses_abc"
    assert run_workflow_id("ses_abc", 2) == "ses_abc::run::2"
    assert run_workflow_id("ses_abc", 17) == "ses_abc::run::17"


def test_new_session_ids_are_unique_and_prefixed() -> None:
    ids = {new_session_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"ses_[0-9a-f]{32}", i) for i in ids)


# --- crash points --------------------------------------------------------------------------

DOCUMENTED_POINTS = {
    "model_answered",
    "model_call",
    "after_model_step",
    "after_dispatch_mark",
    "after_handler",
    "after_tool_result",
    "after_tool_steps",
    "after_run_end",
}


def test_crash_points_are_documented_in_order() -> None:
    assert set(crashpoints.CRASH_POINTS) == DOCUMENTED_POINTS
    assert crashpoints.CRASH_POINTS[0] == "model_answered"
    assert crashpoints.CRASH_POINTS[-1] == "after_run_end"
    repo = Path(__file__).resolve().parents[2]
    for doc in ("docs/testing.md", "docs/architecture.md"):
        text = (repo / doc).read_text()
        assert [p for p in crashpoints.ALL_POINTS if f"`{p}`" not in text] == [], doc
    assert crashpoints.INNER_STEP_POINTS == (
        "inner_step_marked",
        "inner_step_ran",
        "inner_step_recorded",
    )


def test_testing_package_reexports_crash_points() -> None:
    from dbos_agents.testing import CRASH_POINTS

    assert CRASH_POINTS == crashpoints.CRASH_POINTS


@pytest.mark.parametrize("value", [None, ""])
def test_parse_unset_means_unarmed(value: str | None) -> None:
    assert crashpoints._parse(value) == (None, 0)


@pytest.mark.parametrize("point", sorted(DOCUMENTED_POINTS))
def test_parse_plain_name_arms_first_hit(point: str) -> None:
    assert crashpoints._parse(point) == (point, 1)


def test_parse_name_with_hit_number() -> None:
    assert crashpoints._parse("after_handler:3") == ("after_handler", 3)
    assert crashpoints._parse("model_call:1") == ("model_call", 1)


@pytest.mark.parametrize("value", ["nowhere", "after_handlers", "MODEL_CALL", "nowhere:2"])
def test_parse_unknown_name_lists_known_points(value: str) -> None:
    with pytest.raises(ValueError) as info:
        crashpoints._parse(value)
    message = str(info.value)
    assert crashpoints.ENV_VAR in message
    assert repr(value) in message
    for point in DOCUMENTED_POINTS:
        assert point in message


def test_parse_non_numeric_hit_is_rejected() -> None:
    with pytest.raises(ValueError):
        crashpoints._parse("model_call:twice")


@pytest.mark.parametrize("value", ["model_call:0", "model_call:-1"])
def test_parse_rejects_hit_numbers_below_one(value: str) -> None:
    with pytest.raises(ValueError):
        crashpoints._parse(value)


def test_unarmed_crash_point_is_a_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    killed: list[object] = []
    monkeypatch.setattr(crashpoints, "_armed", None)
    monkeypatch.setattr(crashpoints.os, "kill", lambda *a: killed.append(a))
    for point in DOCUMENTED_POINTS:
        crashpoints.crash_point(point)  # type: ignore[arg-type]
    assert killed == []


def test_armed_crash_point_kills_on_the_chosen_hit(monkeypatch: pytest.MonkeyPatch) -> None:
    killed: list[tuple[int, int]] = []
    monkeypatch.setattr(crashpoints, "_armed", "after_model_step")
    monkeypatch.setattr(crashpoints, "_nth", 2)
    monkeypatch.setattr(crashpoints, "_hits", 0)
    monkeypatch.setattr(crashpoints.os, "kill", lambda pid, sig: killed.append((pid, sig)))
    crashpoints.crash_point("after_handler")
    crashpoints.crash_point("after_model_step")
    assert killed == []
    crashpoints.crash_point("after_model_step")
    assert killed == [(crashpoints.os.getpid(), crashpoints.signal.SIGKILL)]


# --- witness -------------------------------------------------------------------------------


def test_witness_records_and_filters_events(tmp_path: Path) -> None:
    w = Witness(tmp_path / "witness.jsonl")
    assert w.events() == []
    assert w.count("charge") == 0
    w.record("charge", key="k1", cents=100)
    w.record("charge", key="k2", cents=100)
    w.record("charge", key="k1", cents=100)
    w.record("model", turn=1)

    assert len(w.events()) == 4
    assert w.events("model") == [{"kind": "model", "turn": 1}]
    assert w.count("charge") == 3
    assert w.count("charge", key="k1") == 2
    assert w.count("charge", key="k1", cents=99) == 0
    assert w.events(key="k2") == [{"kind": "charge", "key": "k2", "cents": 100}]
    assert w.counter("charge", "key") == Counter({"k1": 2, "k2": 1})
    assert w.counter("model", "missing") == Counter({None: 1})


def test_witness_file_is_json_lines_shared_between_instances(tmp_path: Path) -> None:
    path = tmp_path / "w.jsonl"
    Witness(path).record("a", n=1)
    Witness(str(path)).record("b", n=2)
    lines = path.read_text().splitlines()
    assert lines == ['{"kind": "a", "n": 1}', '{"kind": "b", "n": 2}']
    assert Witness(path).count("b") == 1


def test_witness_path_from_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "env.jsonl"
    monkeypatch.setenv("DBOS_AGENTS_WITNESS", str(path))
    w = Witness()
    assert w.path == path
    w.record("x")
    assert path.exists()


def test_witness_without_path_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DBOS_AGENTS_WITNESS", raising=False)
    with pytest.raises(RuntimeError, match="DBOS_AGENTS_WITNESS"):
        Witness()


# --- database URLs -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url",
    [
        "postgres://u:pw@db.example:6543/app",
        "postgresql://u:pw@db.example:6543/app",
        "postgresql+psycopg://u:pw@db.example:6543/app",
        "postgresql+psycopg2://u:pw@db.example:6543/app",
    ],
)
def test_parse_url_normalizes_to_psycopg(url: str) -> None:
    parsed = parse_url(url)
    assert parsed.drivername == "postgresql+psycopg"
    assert (parsed.username, parsed.password, parsed.host, parsed.port, parsed.database) == (
        "u",
        "pw",
        "db.example",
        6543,
        "app",
    )
    assert sqlalchemy_url(url) == "postgresql+psycopg://u:pw@db.example:6543/app"


@pytest.mark.parametrize(
    "url", ["sqlite:///tmp/x.db", "sqlite://", "mysql://u@h/db", "mssql+pyodbc://u@h/db"]
)
def test_parse_url_rejects_other_databases(url: str) -> None:
    with pytest.raises(ConfigurationError, match="needs PostgreSQL"):
        parse_url(url)


@pytest.mark.parametrize("url", ["postgresql://u:pw@h:5432", "postgresql://u@h/", "postgres://h"])
def test_parse_url_rejects_url_without_database(url: str) -> None:
    with pytest.raises(ConfigurationError, match="names no database"):
        parse_url(url)


@pytest.mark.parametrize("url", ["", "not a url", "://nothing"])
def test_parse_url_rejects_garbage(url: str) -> None:
    with pytest.raises(ConfigurationError, match="invalid database URL"):
        parse_url(url)


def test_configuration_error_code() -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_url("sqlite://")
    assert info.value.code == "INVALID_CONFIGURATION"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql://u:s3cr3t-pw@db.example:6543/app", "db.example:6543/app"),
        ("postgres://u:s3cr3t-pw@db.example/app", "db.example:5432/app"),
        ("postgresql://u:s3cr3t-pw@/app?host=/var/run/pg", "/var/run/pg:5432/app"),
        ("postgresql://u:s3cr3t-pw@/app", "local socket:5432/app"),
    ],
)
def test_describe_names_host_port_database(url: str, expected: str) -> None:
    assert describe(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://admin:s3cr3t-pw@db.example:6543/app",
        "postgres://admin:s3cr3t-pw@db.example/app",
        "postgresql+psycopg://admin:s3cr3t-pw@/app?host=/tmp",
    ],
)
def test_describe_never_includes_password_or_user(url: str) -> None:
    text = describe(url)
    assert "s3cr3t" not in text
    assert "admin" not in text


# --- migrations ----------------------------------------------------------------------------


def test_load_migrations_returns_versions_one_to_n_in_order() -> None:
    migrations = load_migrations()
    assert len(migrations) >= 1
    assert [m.version for m in migrations] == list(range(1, len(migrations) + 1))
    assert migrations[0].name == "initial"
    for m in migrations:
        assert re.fullmatch(r"[a-z0-9_]+", m.name)
        assert m.sql.strip()
    assert "dbos_agents" in migrations[0].sql


def _fake_package(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    monkeypatch.setattr(migrate_module, "resources", SimpleNamespace(files=lambda pkg: root))


def test_load_migrations_sorts_and_ignores_other_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mig = tmp_path / "migrations"
    mig.mkdir()
    (mig / "0002_second.sql").write_text("SELECT 2;")
    (mig / "0001_first.sql").write_text("SELECT 1;")
    (mig / "README.md").write_text("not a migration")
    (mig / "0003_Bad-Name.sql").write_text("ignored: name does not match")
    _fake_package(monkeypatch, tmp_path)
    migrations = load_migrations()
    assert [(m.version, m.name, m.sql) for m in migrations] == [
        (1, "first", "SELECT 1;"),
        (2, "second", "SELECT 2;"),
    ]


def test_load_migrations_rejects_gaps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mig = tmp_path / "migrations"
    mig.mkdir()
    (mig / "0001_first.sql").write_text("SELECT 1;")
    (mig / "0003_third.sql").write_text("SELECT 3;")
    _fake_package(monkeypatch, tmp_path)
    with pytest.raises(RuntimeError, match=r"without gaps, found \[1, 3\]"):
        load_migrations()


# --- settings ------------------------------------------------------------------------------


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("EXECUTOR_ID", "APPLICATION_VERSION", "DATABASE_URL", "QUEUE_NAME"):
        monkeypatch.delenv(f"DBOS_AGENTS_{name}", raising=False)
    return monkeypatch


def test_settings_read_executor_id_and_application_version_from_env(
    clean_env: pytest.MonkeyPatch,
) -> None:
    clean_env.setenv("DBOS_AGENTS_EXECUTOR_ID", "worker-7")
    clean_env.setenv("DBOS_AGENTS_APPLICATION_VERSION", "release-42")
    clean_env.setenv("DBOS_AGENTS_DATABASE_URL", "postgresql://h/db")
    s = Settings()
    assert s.executor_id == "worker-7"
    assert s.application_version == "release-42"
    assert s.database_url == "postgresql://h/db"


def test_settings_application_version_is_pinned(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings()
    assert s.application_version == "dbos-agents-1"
    field = Settings.model_fields["application_version"]
    assert field.default == "dbos-agents-1"
    assert field.default_factory is None


def test_settings_default_executor_id_is_a_slot_of_the_host(clean_env: pytest.MonkeyPatch) -> None:
    import socket

    from dbos_agents.worker.identity import lock_keys, slot_id

    assert Settings().executor_id is None  # the worker takes a free slot at launch
    host = socket.gethostname()
    assert slot_id(0) == f"worker-{host}"  # the id of earlier releases: an upgrade recovers
    assert [slot_id(i, "h") for i in (1, 2)] == ["worker-h:1", "worker-h:2"]
    assert lock_keys("a") == lock_keys("a") != lock_keys("b")


def test_settings_defaults(clean_env: pytest.MonkeyPatch) -> None:
    s = Settings()
    assert s.database_url is None
    assert s.queue_name == "dbos_agents"
    assert s.model_max_attempts == 5


def test_settings_arguments_override_env(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("DBOS_AGENTS_EXECUTOR_ID", "from-env")
    assert Settings(executor_id="explicit").executor_id == "explicit"


def test_settings_file_is_read_and_env_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[dbos_agents]\nqueue_name = "from_file"\nstale_after_sec = 7\n')
    monkeypatch.setenv("DBOS_AGENTS_CONFIG", str(cfg))
    monkeypatch.delenv("DBOS_AGENTS_STALE_AFTER_SEC", raising=False)
    monkeypatch.setenv("DBOS_AGENTS_QUEUE_NAME", "from_env")
    s = Settings()
    assert s.queue_name == "from_env"
    assert s.stale_after_sec == 7


def test_shipped_config_file_parses_into_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.setenv("DBOS_AGENTS_CONFIG", str(repo / "config" / "dbos-agents.toml"))
    s = Settings()
    assert s.application_version == "dbos-agents-1" and s.tombstone_retention_sec == 86400


def test_server_settings_read_the_server_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dbos_agents.server import ServerSettings

    cfg = tmp_path / "c.toml"
    cfg.write_text("[server]\nport = 9123\ntoken_ttl_sec = 60\n")
    monkeypatch.setenv("DBOS_AGENTS_CONFIG", str(cfg))
    monkeypatch.setenv("DBOS_AGENTS_SERVER_TOKEN_TTL_SEC", "120")
    s = ServerSettings()
    assert s.port == 9123 and s.token_ttl_sec == 120
