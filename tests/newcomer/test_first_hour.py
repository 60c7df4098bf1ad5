"""The first hour of a new user, run from docs/first-agent.md itself: every block of that page,
in order, from an empty temporary folder (cwd; no PYTHONPATH, no database configured), with
the installed ``dbos-agents`` of this venv. The agent file and the script are the page's
code blocks, so page and test cannot drift; a block the runner does not know fails the test.

The install block is the one thing not run (``python3 -m venv`` and ``pip install``): this
venv has the package installed already, and its ``bin`` comes first on ``PATH`` as after
``. .venv/bin/activate``. The embedded Postgres is created under the folder by the worker and
stopped by the page's ``dbos-agents db stop`` (and in ``finally`` when the test fails first).
The transcript of commands and outputs is printed (``-s`` shows it; a failure always does).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path

import jsonschema
import pytest

from dbos_agents.models.guard import BLOCK_ENV
from dbos_agents.store.embedded import stop_embedded_database

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "first-agent.md"
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>\w*)\n(?P<body>.*?)^(?P=indent)```", re.M | re.S)
SESSION = re.compile(r"\bses_[0-9a-f]{32}\b")


@dataclass
class Block:
    lang: str
    text: str


def page_blocks() -> list[Block]:
    """The fenced blocks of the page, in order, dedented (a block may sit in a list item)."""
    text = PAGE.read_text()
    return [Block(m["lang"], textwrap.dedent(m["body"])) for m in FENCE.finditer(text)]


def newcomer_env() -> dict[str, str]:
    """What a fresh shell with the venv active has: no DBOS_AGENTS_* setting (the test
    suite's real-model guard aside), no PYTHONPATH, this venv first on PATH."""
    env = {
        k: v
        for k, v in os.environ.items()
        if (not k.startswith("DBOS_AGENTS_") or k == BLOCK_ENV)
        and k not in ("PYTHONPATH", "OPENAI_API_KEY", "OPENAI_BASE_URL")
    }
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(BIN.parent)
    return env


@dataclass
class Newcomer:
    """Runs the page's commands as a user would, keeping what they need from earlier output
    (the session id from ``start``, the submit command ``pending`` printed)."""

    cwd: Path
    env: dict[str, str]
    transcript: list[str] = field(default_factory=list)
    worker: subprocess.Popen[str] | None = None
    worker_log: Path | None = None
    session_id: str | None = None
    answered: set[str] = field(default_factory=set)
    pending_submit: list[str] | None = None
    pending_schema: dict[str, object] | None = None
    outputs: dict[str, str] = field(default_factory=dict)

    began: float = field(default_factory=time.monotonic)

    def say(self, text: str) -> None:
        """Commands with the seconds since the test began (the page promises minutes)."""
        stamp = f"[{time.monotonic() - self.began:5.1f}s] " if text.startswith(("$", "(")) else ""
        self.transcript.append(stamp + text.rstrip())

    def run(self, argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
        self.say(f"$ {shlex.join(argv)}")
        exe = str(BIN / argv[0]) if (BIN / argv[0]).exists() else argv[0]
        r = subprocess.run(
            [exe, *argv[1:]],
            capture_output=True,
            text=True,
            cwd=self.cwd,
            env=self.env,
            timeout=timeout,
        )
        self.say(r.stdout + r.stderr)
        assert r.returncode == 0, f"{shlex.join(argv)} -> {r.returncode}:\n{r.stdout}{r.stderr}"
        self.outputs[" ".join(a for a in argv[:3] if not SESSION.fullmatch(a))] = r.stdout
        return r

    def ids(self, argv: list[str]) -> list[str]:
        """The page's placeholders, filled from what earlier commands printed."""
        call_id = self.pending_submit[3] if self.pending_submit else None
        filled = []
        for arg in argv:
            if arg == "SESSION_ID":
                assert self.session_id, "SESSION_ID before a session was started"
                arg = self.session_id
            elif arg == "CALL_ID":
                assert call_id, "CALL_ID before `dbos-agents pending` showed one"
                arg = call_id
            filled.append(arg)
        return filled

    # --- the commands -------------------------------------------------------------------

    def command(self, argv: list[str]) -> None:
        head = argv[:2]
        if argv[0] == "mkdir":
            (self.cwd / argv[1]).mkdir()
            self.say(f"$ {shlex.join(argv)}")
        elif argv[0] == "cd":
            self.cwd = self.cwd / argv[1]
            self.say(f"$ {shlex.join(argv)}")
        elif argv[0] in ("pip", ".", "source") or argv[:3] == ["python3", "-m", "venv"]:
            self.say(f"$ {shlex.join(argv)}   # skipped: this venv has dbos-agents installed")
        elif head == ["dbos-agents", "worker"]:
            self.start_worker(argv)
        elif head == ["dbos-agents", "start"]:
            out = self.run(argv).stdout
            found = SESSION.search(out)
            assert found, out
            self.session_id = found[0]
        elif head == ["dbos-agents", "pending"]:
            self.pending(argv)
        elif head == ["dbos-agents", "submit"] and "--result" in argv:
            self.answer_client_tool(argv)
        elif head == ["dbos-agents", "db"] and argv[2:3] == ["stop"]:
            self.stop_worker()
            self.run(argv)
        elif argv[0] in ("dbos-agents", "python"):
            self.run(self.ids(argv))
        else:
            raise AssertionError(f"the test does not know how to run {shlex.join(argv)}")

    def start_worker(self, argv: list[str]) -> None:
        self.say(f"$ {shlex.join(argv)} &")
        self.worker_log = self.cwd / "worker.log"
        with self.worker_log.open("w") as log:
            self.worker = subprocess.Popen(
                [str(BIN / argv[0]), *argv[1:]],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=self.cwd,
                env=self.env,
            )
        deadline = time.monotonic() + 180  # the embedded Postgres is created first
        while "dbos-agents worker ready" not in self.worker_log.read_text():
            assert self.worker.poll() is None, self.worker_log.read_text()
            assert time.monotonic() < deadline, self.worker_log.read_text()
            time.sleep(0.2)

    def pending(self, argv: list[str]) -> None:
        """Wait until the run waits on a call not answered yet (a reader reruns `pending`),
        then run the page's command and keep the submit command it printed."""
        deadline = time.monotonic() + 60
        while True:
            rows = json.loads(self._quiet([*argv, "--json"]))
            fresh = [r for r in rows if r["tool_call_id"] not in self.answered]
            if fresh:
                break
            assert time.monotonic() < deadline, f"nothing pending: {rows}"
            time.sleep(0.3)
        out = self.run(argv).stdout
        lines = [ln.strip() for ln in out.splitlines() if ln.strip().startswith("dbos-agents ")]
        submits = [shlex.split(ln) for ln in lines if ln.startswith("dbos-agents submit ")]
        assert submits, f"`pending` printed no submit command:\n{out}"
        self.pending_submit = submits[0]
        assert self.pending_submit[2] == self.session_id
        assert self.pending_submit[3] == fresh[0]["tool_call_id"]
        self.pending_schema = fresh[0]["output_schema"]
        self.answered.add(fresh[0]["tool_call_id"])

    def answer_client_tool(self, argv: list[str]) -> None:
        """Run the command `pending` printed, its example result included; the page's own
        result must fit the same schema (a reader types that one)."""
        assert self.pending_submit is not None and self.pending_schema is not None
        page_result = json.loads(argv[argv.index("--result") + 1])
        jsonschema.validate(page_result, self.pending_schema)
        printed = self.pending_submit
        if "<json>" in printed:  # no example printed: build one from the schema
            printed = [*printed[:-1], json.dumps(page_result)]
        assert "--result" in printed, printed
        assert "accepted" in self.run(printed).stdout

    def stop_worker(self) -> None:
        """Ctrl-C in the worker's terminal: it drains and exits 0."""
        assert self.worker is not None
        self.say("(Ctrl-C in the worker's terminal)")
        self.worker.send_signal(signal.SIGINT)
        assert self.worker.wait(timeout=60) == 0, self._worker_text()

    def _quiet(self, argv: list[str]) -> str:
        r = subprocess.run(
            [str(BIN / argv[0]), *argv[1:]],
            capture_output=True,
            text=True,
            cwd=self.cwd,
            env=self.env,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout

    def _worker_text(self) -> str:
        return self.worker_log.read_text() if self.worker_log else ""


def shell_lines(text: str) -> list[list[str]]:
    """Each command of a bash block (comments dropped, ``&&`` chains split)."""
    commands = []
    for line in text.splitlines():
        argv = shlex.split(line, comments=True)
        while argv:
            cut = argv.index("&&") if "&&" in argv else len(argv)
            commands.append(argv[:cut])
            argv = argv[cut + 1 :]
    return commands


def expected_lines(text: str) -> list[re.Pattern[str]]:
    """A ``text`` block of expected output: PORT and WORKER stand for what varies."""
    patterns = []
    for line in text.strip().splitlines():
        pattern = re.escape(line).replace("PORT", r"\d+").replace("WORKER", r"\S+")
        patterns.append(re.compile(f"^{pattern}$", re.M))
    return patterns


def test_first_agent_page_from_an_empty_folder(tmp_path: Path) -> None:
    user = Newcomer(tmp_path, newcomer_env())
    expected_worker_output: list[re.Pattern[str]] = []
    try:
        for block in page_blocks():
            if block.lang == "python":
                first = block.text.splitlines()[0]
                if re.fullmatch(r"# \w+\.py", first):
                    (user.cwd / first[2:]).write_text(block.text)
                    user.say(f"(wrote {first[2:]} from the page)")
                else:  # a snippet: it must at least run
                    user.env["OPENAI_API_KEY"] = "sk-not-used"
                    user.run(["python", "-c", block.text])
                    del user.env["OPENAI_API_KEY"]
            elif block.lang == "bash":
                for argv in shell_lines(block.text):
                    user.command(argv)
            elif block.lang == "text":
                expected_worker_output += expected_lines(block.text)
            else:
                raise AssertionError(f"a {block.lang or 'plain'} block the test cannot run")
    finally:
        print("\n".join(user.transcript))
        if user.worker is not None and user.worker.poll() is None:
            user.worker.kill()
            user.worker.wait(timeout=30)
        print(f"--- worker log ---\n{user._worker_text()}")
        stop_embedded_database(user.cwd / ".dbos_agents" / "pgdata")

    # The worker: the page's lines, then the drain on Ctrl-C.
    log = user._worker_text()
    assert expected_worker_output, "the page shows no worker output"
    for pattern in expected_worker_output:
        assert pattern.search(log), f"{pattern.pattern} not in the worker's output:\n{log}"
    assert "worker stopped" in log
    assert user.session_id is not None and user.session_id in log  # it says what it runs
    # The agent ran all three kinds of tools, and Python read it with AgentClient().
    assert "completed" in user.outputs["dbos-agents show"]
    read = user.outputs["python read.py"]
    assert "shop: completed after 4 turns" in read
    assert "Done: 2 grinders are on their way." in read
    assert "place_order(" in read and "check_stock(" in read and "ask_customer(" in read
    # Nothing left running: `db stop` stopped the embedded Postgres the worker created.
    assert (
        "stopped the embedded Postgres in .dbos_agents/pgdata"
        in user.outputs["dbos-agents db stop"]
    )
    assert (user.cwd / ".dbos_agents" / "pgdata" / "PG_VERSION").exists()
    assert not (user.cwd / ".dbos_agents" / "pgdata" / "postmaster.pid").exists()
