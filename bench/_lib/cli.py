"""The command-line patterns of the bench scripts: the parser, ``--database-url``,
``--json`` (the human report on stderr, one JSON object on stdout) and package versions."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import sys
from collections.abc import Iterator
from importlib.metadata import version
from typing import Any


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A parser whose description is the first paragraph of the script's docstring."""
    return argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])


def add_database_url(p: argparse.ArgumentParser, *, from_env: bool = False) -> None:
    """``--database-url``; with ``from_env`` it defaults to DBOS_AGENTS_DATABASE_URL."""
    default = os.environ.get("DBOS_AGENTS_DATABASE_URL") if from_env else None
    p.add_argument("--database-url", default=default)


def options(p: argparse.ArgumentParser, **defaults: float) -> None:
    """``--name`` options without help text, typed by their default (``start_wave=0`` is
    ``--start-wave``, an int)."""
    for name, default in defaults.items():
        p.add_argument(f"--{name.replace('_', '-')}", type=type(default), default=default)


@contextlib.contextmanager
def report_to_stderr(enabled: bool) -> Iterator[None]:
    """With ``--json`` the human report (rich and print alike) goes to stderr, so stdout
    keeps only the JSON object."""
    with contextlib.redirect_stdout(sys.stderr) if enabled else contextlib.nullcontext():
        yield


def print_json(result: Any, **dumps: Any) -> None:
    """The one JSON object of ``--json``, on stdout."""
    print(json.dumps(result, **dumps), flush=True)


def versions(*packages: str) -> dict[str, str]:
    """Python's, DBOS's and dbos-agents' versions (and ``packages``'), so a figure is never
    quoted without what produced it."""
    out = {"python": platform.python_version()}
    for name in ("dbos", "dbos-agents", *packages):
        out[name] = version(name)
    return out
