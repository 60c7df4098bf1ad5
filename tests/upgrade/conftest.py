"""The previous release, built once per test session into a venv of its own.

``PREVIOUS_RELEASE`` names the commit (its full hash: a clean clone may not carry tags).
Its source is taken with ``git archive`` from the repository these tests run in (nothing is
written into the repository: no worktree, no checkout), and installed, not editable, into a
fresh venv. Its dependencies are pinned to the versions installed here when they satisfy
its requirements, so the two sides differ only in ``dbos_agents`` itself; when they do not
(a later release moved a pin), it falls back to the newest versions its requirements allow.
The venv is deleted when the session ends (the source as soon as it is installed).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PREVIOUS_RELEASE_FILE = HERE / "PREVIOUS_RELEASE"
BUILD_TIMEOUT_SEC = 900
BUILD_PINS = "setuptools==84.2.1\nwheel==0.48.0\n"
"""The build backend that builds the previous release (pip's ``PIP_BUILD_CONSTRAINT``;
older pips ignore it). Its ``pyproject.toml`` cannot change any more, and setuptools
deprecates its ``project.license`` table, announcing the end of its support for 2027-02-18:
an unpinned build would pick up that setuptools one day."""


@dataclass(frozen=True)
class PreviousRelease:
    commit: str
    python: Path
    """The interpreter of a venv where ``import dbos_agents`` is that commit's code."""


def previous_release_commit() -> str:
    commit = PREVIOUS_RELEASE_FILE.read_text().strip()
    if not re.fullmatch(r"[0-9a-f]{40}", commit):
        raise ValueError(f"{PREVIOUS_RELEASE_FILE} must hold a full 40-hex commit, got {commit!r}")
    return commit


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=120)


def _export_source(commit: str, dest: Path) -> None:
    """The commit's tree under ``dest`` (``git archive``: read-only on the repository)."""
    top = _git(HERE, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        pytest.fail(f"tests/upgrade needs a git checkout: {top.stderr.decode().strip()}")
    repo = Path(top.stdout.decode().strip())
    if _git(repo, "cat-file", "-e", f"{commit}^{{commit}}").returncode != 0:
        pytest.fail(
            f"the previous release {commit} ({PREVIOUS_RELEASE_FILE.name}) is not in this"
            f" clone of {repo}: a shallow clone? `git fetch --unshallow` brings it"
        )
    archive = _git(repo, "archive", "--format=tar", commit)
    if archive.returncode != 0:
        pytest.fail(f"git archive {commit} failed: {archive.stderr.decode().strip()}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
        else:  # Python 3.11 before 3.11.4; our own repository's archive
            tar.extractall(dest)


def _constraints(path: Path) -> Path:
    """``name==version`` of every distribution installed here but ``dbos-agents``."""
    pins = sorted(
        {
            f"{d.metadata['Name']}=={d.version}"
            for d in importlib.metadata.distributions()
            if d.metadata["Name"] and d.metadata["Name"].lower().replace("_", "-") != "dbos-agents"
        }
    )
    path.write_text("\n".join(pins) + "\n")
    return path


def _pip(python: Path, build_pins: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """pip of this interpreter installing into ``python``'s venv, else the venv's own."""
    env = {"PIP_BUILD_CONSTRAINT": str(build_pins), **os.environ}
    if importlib.util.find_spec("pip") is not None:
        argv = [sys.executable, "-m", "pip", "--python", str(python)]
    else:
        argv = [str(python), "-m", "pip"]
    return subprocess.run(
        [*argv, "install", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_SEC,
        env=env,
    )


def _build(commit: str, root: Path) -> Path:
    source, venv = root / "source", root / "venv"
    source.mkdir()
    _export_source(commit, source)
    with_pip = importlib.util.find_spec("pip") is None
    subprocess.run(
        [sys.executable, "-m", "venv", *([] if with_pip else ["--without-pip"]), str(venv)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    python = venv / "bin" / "python"
    constraints = _constraints(root / "constraints.txt")
    build_pins = root / "build-constraints.txt"
    build_pins.write_text(BUILD_PINS)
    done = _pip(python, build_pins, "-c", str(constraints), str(source))
    if done.returncode != 0 and "ResolutionImpossible" in done.stdout + done.stderr:
        warnings.warn(
            f"the previous release {commit[:12]} does not accept the dependency versions"
            " installed here; it gets the newest ones its requirements allow",
            stacklevel=1,
        )
        done = _pip(python, build_pins, str(source))
    if done.returncode != 0:
        pytest.fail(
            f"could not install the previous release {commit} into a venv (is PyPI, or the"
            f" configured index, reachable?): pip exited {done.returncode}\n"
            f"{(done.stdout + done.stderr)[-4000:]}"
        )
    shutil.rmtree(source)
    return python


@pytest.fixture(scope="session")
def previous_release() -> Iterator[PreviousRelease]:
    commit = previous_release_commit()
    root = Path(tempfile.mkdtemp(prefix=f"dbos-agents-{commit[:12]}-"))
    try:
        python = _build(commit, root)
        # The venv's code is the commit's, not this tree's (a stray path would hide that).
        found = subprocess.run(
            [str(python), "-c", "import dbos_agents; print(dbos_agents.__file__)"],
            capture_output=True,
            text=True,
            cwd=root,
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
            timeout=120,
        )
        assert found.returncode == 0, found.stderr
        assert Path(found.stdout.strip()).resolve().is_relative_to((root / "venv").resolve())
        yield PreviousRelease(commit=commit, python=python)
    finally:
        shutil.rmtree(root, ignore_errors=True)
