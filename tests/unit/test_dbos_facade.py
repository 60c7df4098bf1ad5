"""``dbos_agents._dbos``: the version gate, the layer rule that keeps every private DBOS
name inside the package, and what each mode of ``outside_workflow`` guarantees. The fast
paths themselves are tested by behaviour against real DBOS (test_dbos_recv,
test_recovery_chunks, test_parking, test_local_start, test_client_tools' send row), and
the crash suite runs once more with ``DBOS_AGENTS_DBOS_FAST_PATHS=false`` in CI."""

from __future__ import annotations

import ast
import asyncio
import logging
import pathlib
import tomllib

import pytest

from dbos_agents import UnsupportedDBOSError, _dbos
from dbos_agents._dbos import version

PKG = pathlib.Path(__file__).resolve().parents[2] / "dbos_agents"


def test_the_installed_dbos_is_reviewed_and_pinned_to_the_reviewed_range() -> None:
    assert version.is_reviewed(version.installed()), version.installed()
    project = tomllib.loads((PKG.parent / "pyproject.toml").read_text())["project"]
    assert f"dbos{_dbos.REVIEWED}" in project["dependencies"]


@pytest.mark.parametrize(
    ("release", "reviewed"),
    [("3.4.0", True), ("3.4.12", True), ("3.4.1rc1", True), ("3.5.0", False),
     ("3.3.9", False), ("4.4.0", False), ("garbage", False)],
)  # fmt: skip
def test_is_reviewed(release: str, reviewed: bool) -> None:
    assert version.is_reviewed(release) is reviewed


def test_an_unreviewed_release_is_refused_with_fast_paths_and_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with pytest.raises(UnsupportedDBOSError) as err:
        version.check(fast_paths=True, release="3.5.0")
    assert "dbos 3.5.0" in str(err.value) and _dbos.REVIEWED in str(err.value)
    assert "DBOS_AGENTS_DBOS_FAST_PATHS=false" in str(err.value)
    assert err.value.code == "UNSUPPORTED_DBOS"
    with caplog.at_level(logging.WARNING, logger="dbos_agents"):
        version.check(fast_paths=False, release="3.5.0")  # stock DBOS: a warning only
    assert any("3.5.0" in r.getMessage() for r in caplog.records)


def _imports(path: pathlib.Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            base = ".".join(path.relative_to(PKG.parent).with_suffix("").parts[: -node.level])
            found.add(f"{base}.{node.module}" if node.module else base)
            prefix = f"{base}.{node.module}" if node.module else base
            found.update(f"{prefix}.{a.name}" for a in node.names)
    return found


def test_private_dbos_names_are_used_only_inside_the_facade_package() -> None:
    outside = {}
    for path in PKG.rglob("*.py"):
        if "_dbos" in path.relative_to(PKG).parts[:1]:
            continue
        bad = {
            m
            for m in _imports(path)
            if m.startswith("dbos._")
            or (m.startswith("dbos_agents._dbos.") and m.split(".")[2] != "LocalStart")
        }
        if bad:
            outside[str(path.relative_to(PKG))] = sorted(bad)
    assert outside == {}


@pytest.mark.asyncio
@pytest.mark.parametrize("fast", [True, False])
async def test_outside_workflow_runs_with_no_dbos_context(fast: bool) -> None:
    from dbos import DBOS
    from dbos._context import DBOSContext, _dbos_context_var  # a workflow's context, by hand

    async def inside() -> object:
        await asyncio.sleep(0)
        return DBOS.workflow_id

    ctx = DBOSContext()
    ctx.workflow_id = "wf-outside-test"
    token = _dbos_context_var.set(ctx)
    was = _dbos.fast_paths()
    _dbos.configure(fast_paths=fast)
    try:
        assert await inside() == "wf-outside-test"  # the control: inside, a workflow
        assert await _dbos.outside_workflow(inside()) is None
        assert DBOS.workflow_id == "wf-outside-test"  # the caller's context is untouched
    finally:
        _dbos.configure(fast_paths=was)
        _dbos_context_var.reset(token)
