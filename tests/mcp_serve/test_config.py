"""Serving agents as MCP tools is refused clearly when it cannot work, and the server
still builds without the ``mcp`` SDK when MCP is off."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from dbos_agents.errors import ConfigurationError
from dbos_agents.server import ServerSettings, create_app

URL = "postgresql://nobody@127.0.0.1:1/none"  # never reached: the app is only built


def test_mcp_needs_a_secret() -> None:
    s = ServerSettings(database_url=URL, allow_unauthenticated=True, mcp=True)
    with pytest.raises(ConfigurationError, match="token secret"):
        create_app(s)


def test_an_mcp_agent_entry_must_name_agents() -> None:
    s = ServerSettings(
        database_url=URL,
        allow_unauthenticated=True,
        secret="s" * 40,
        mcp=True,
        mcp_agents=["tests.mcp_serve.app:respond"],
    )
    with pytest.raises(ConfigurationError, match="not an Agent"):
        create_app(s)


def test_the_route_is_mounted_only_when_on() -> None:
    base = {"database_url": URL, "allow_unauthenticated": True, "secret": "s" * 40}
    off = create_app(ServerSettings(**base))
    on = create_app(ServerSettings(**base, mcp=True, mcp_path="/tools"))
    paths = lambda app: {getattr(r, "path", None) for r in app.routes}  # noqa: E731
    assert "/tools" in paths(on) and "/tools" not in paths(off)


def test_without_the_sdk_the_server_builds_and_mcp_is_refused_clearly() -> None:
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["mcp"] = None  # as if the extra were not installed
        sys.modules["mcp_types"] = None
        from dbos_agents.errors import ConfigurationError
        from dbos_agents.server import ServerSettings, create_app
        base = dict(database_url={URL!r}, allow_unauthenticated=True, secret="s" * 40)
        create_app(ServerSettings(**base))
        try:
            create_app(ServerSettings(**base, mcp=True))
        except ConfigurationError as exc:
            print(exc)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "pip install 'dbos-agents[mcp]'" in out.stdout
