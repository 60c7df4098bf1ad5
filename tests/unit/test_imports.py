"""``module:attr`` specs (``--app``, ``--auth``, settings) load from the current folder, as
uvicorn and celery do: a newcomer's ``myagent.py`` next to them, no ``PYTHONPATH``."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from dbos_agents.errors import ConfigurationError
from dbos_agents.imports import import_object

BIN = Path(sys.executable).parent


def test_a_module_in_the_current_folder_loads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"newcomer_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text("runtime = 42\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    try:
        assert import_object(f"{name}:runtime", "--app") == 42
    finally:
        sys.modules.pop(name, None)


def test_a_missing_module_still_names_the_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigurationError, match="cannot load 'nowhere_xyz:runtime'"):
        import_object("nowhere_xyz:runtime", "--app")


def test_the_installed_command_loads_an_app_from_its_folder(tmp_path: Path) -> None:
    """The console script (not ``python -m``, which puts the cwd on the path itself)."""
    (tmp_path / "myagent.py").write_text(
        "from dbos_agents import Agent, AgentRuntime\n"
        "from dbos_agents.models import ScriptedModel\n"
        "runtime = AgentRuntime([Agent('shop', 'hi')], ScriptedModel(['hello']))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [str(BIN / "dbos-agents"), "start", "nope", "hi", "--app", "myagent:runtime"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    # The agent name is checked against the loaded app before any database is touched.
    assert r.returncode == 10, r.stderr
    assert "UNKNOWN_AGENT" in r.stderr and "shop" in r.stderr


def test_serve_loads_its_auth_hook_from_the_folder(tmp_path: Path) -> None:
    """``serve --auth myhooks:authenticate`` imports the folder's module: here its attribute
    is not callable, which only an import that worked can tell (no server, no database)."""
    (tmp_path / "myhooks.py").write_text("authenticate = 42\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [str(BIN / "dbos-agents"), "serve", "--auth", "myhooks:authenticate"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
    )
    assert r.returncode == 2, r.stderr
    assert "authenticate hook 'myhooks:authenticate' is not callable" in r.stderr
    assert not (tmp_path / ".dbos_agents").exists()
