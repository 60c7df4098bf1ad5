"""The code in README.md and docs/ works as written: every Python block compiles and its
``dbos_agents`` imports resolve, README's agent file builds its runtime, and every
``dbos-agents`` command line in a shell block parses (its command and options exist).
docs/first-agent.md is run whole by tests/newcomer."""

from __future__ import annotations

import ast
import importlib
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer

from dbos_agents.cli import app

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def _blocks(lang: str) -> list[tuple[str, int, str]]:
    found = []
    for page in PAGES:
        if page.name == "first-agent.md":
            continue
        text = page.read_text()
        for m in FENCE.finditer(text):
            if m.group(1) == lang:
                line = text.count("\n", 0, m.start()) + 1
                found.append((page.name, line, m.group(2)))
    return found


PYTHON = _blocks("python")
SHELL = _blocks("bash")


@pytest.mark.parametrize(("page", "line", "code"), PYTHON, ids=[f"{p}:{n}" for p, n, _ in PYTHON])
def test_python_blocks_compile_and_import(page: str, line: int, code: str) -> None:
    tree = compile(
        code, f"{page}:{line}", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    assert isinstance(tree, ast.Module)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("dbos_agents"):
            module = importlib.import_module(node.module or "")
            missing = [a.name for a in node.names if not hasattr(module, a.name)]
            assert not missing, f"{page}:{line}: {node.module} has no {missing}"


def test_readme_agent_file_builds_its_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """README's "Your first agent" file, executed: a runtime with the three tools."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")
    code = next(c for p, _, c in PYTHON if p == "README.md" and "# myagent.py" in c)
    scope: dict[str, object] = {}
    exec(compile(code, "README.md:myagent.py", "exec"), scope)
    shop = scope["shop"]
    assert sorted(shop.tool_names()) == ["ask_customer", "check_stock", "place_order"]  # type: ignore[attr-defined]
    assert scope["runtime"] is not None


def _command_lines() -> list[tuple[str, int, list[str]]]:
    lines = []
    for page, start, code in SHELL:
        for n, raw in enumerate(code.replace("\\\n", " ").splitlines()):
            text = raw.split(" #")[0].strip()
            if "$(" in text:
                continue
            for part in re.split(r"&&|\|", text):
                words = shlex.split(part.strip())
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words.pop(0)  # VAR=value prefixes
                if words[:1] == ["dbos-agents"] and not any(
                    w.startswith(("[", "<")) or w in ("...", "…") for w in words
                ):
                    lines.append((page, start + 1 + n, words[1:]))
    return lines


COMMANDS = _command_lines()


@pytest.mark.parametrize(
    ("page", "line", "args"), COMMANDS, ids=[f"{p}:{n}" for p, n, _ in COMMANDS]
)
def test_command_lines_parse(page: str, line: int, args: list[str]) -> None:
    # typer may bring its own copy of click: its classes are duck-typed here.
    cmd: Any = typer.main.get_command(app)
    rest = list(args)
    while hasattr(cmd, "get_command") and rest and not rest[0].startswith("-"):
        sub = cmd.get_command(
            cmd.make_context("dbos-agents", ["--help"], resilient_parsing=True), rest[0]
        )
        assert sub is not None, f"{page}:{line}: no command {rest[0]!r} in {args}"
        cmd, rest = sub, rest[1:]
    try:
        cmd.make_context(cmd.name or "", rest)
    except Exception as exc:
        if type(exc).__name__ == "Exit" and getattr(exc, "exit_code", 1) == 0:
            return  # --help and the like
        message = exc.format_message() if hasattr(exc, "format_message") else str(exc)
        pytest.fail(f"{page}:{line}: dbos-agents {' '.join(args)}: {message}")
