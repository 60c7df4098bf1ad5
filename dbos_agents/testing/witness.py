"""An out-of-process witness: a JSON-lines file that tools and models append to.

A SIGKILLed worker cannot lie about what it did: each ``record`` is one ``write(2)`` on an
``O_APPEND`` descriptor, in the kernel before the call returns, so it survives the kill.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

ENV_VAR = "DBOS_AGENTS_WITNESS"


class Witness:
    """Append-only event log shared by the test and the worker subprocess."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        raw = path if path is not None else os.environ.get(ENV_VAR)
        if not raw:
            raise RuntimeError(f"no witness path: pass one or set {ENV_VAR}")
        self.path = Path(raw)

    def record(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"kind": kind, **fields}, sort_keys=True) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def events(self, kind: str | None = None, **match: Any) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        out = []
        for line in self.path.read_text().splitlines():
            ev = json.loads(line)
            if (kind is None or ev["kind"] == kind) and all(
                ev.get(k) == v for k, v in match.items()
            ):
                out.append(ev)
        return out

    def count(self, kind: str, **match: Any) -> int:
        return len(self.events(kind, **match))

    def counter(self, kind: str, field: str) -> Counter[Any]:
        return Counter(ev.get(field) for ev in self.events(kind))
