"""The package's layers (shared/DESIGN.md section 2), checked on its import graph: no
cycle, and every import goes to the importer's own layer or one below it. Imports under
``if TYPE_CHECKING:`` are for annotations only and do not count. Importing ``a.b.c`` runs
the ``__init__`` of ``a.b`` first (unless the importer is inside ``a.b``, whose ``__init__``
has then already begun), so those count as arrows too: a cycle through a package's
``__init__`` fails a process's first import."""

from __future__ import annotations

import ast
import pathlib

import pytest

PKG = pathlib.Path(__file__).resolve().parents[2] / "dbos_agents"

DEFINITIONS = "definitions"
LAYER_OF_PACKAGE = {"_dbos": "_dbos", "store": "store", "live": "live", "loop": "loop", "worker": "worker",
                    "client": "client", "server": "server", "cli": "cli", "testing": "testing",
                    "models": DEFINITIONS, "examples": "examples"}  # fmt: skip
TOP_MODULES = {"demo": "cli"}
"""Top-level modules outside the definitions layer (``dbos-agents demo``)."""

BELOW = {
    DEFINITIONS: set(),
    "_dbos": {DEFINITIONS},
    "store": {DEFINITIONS, "_dbos"},
    "live": {DEFINITIONS, "_dbos", "store"},
    "loop": {DEFINITIONS, "_dbos", "store", "live"},
    "worker": {DEFINITIONS, "_dbos", "store", "live", "loop"},
    "client": {DEFINITIONS, "_dbos", "store", "live"},
    "server": {DEFINITIONS, "client", "live"},
    "testing": {DEFINITIONS, "_dbos", "store", "live", "client", "loop"},
    "cli": {
        DEFINITIONS,
        "_dbos",
        "store",
        "live",
        "client",
        "worker",
        "server",
        "testing",
        "examples",
    },
    "examples": {DEFINITIONS, "client", "worker", "testing"},
}
"""What each layer may import besides itself: the client never imports the loop or the
worker; only the worker and testing (its crash points) import the loop; the server is
built on the client and ``live/``, never on ``store/`` or ``_dbos/``."""


def _module(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PKG.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def layer(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return DEFINITIONS  # the package's own __init__: the public surface
    if parts[1] in LAYER_OF_PACKAGE:
        return LAYER_OF_PACKAGE[parts[1]]
    return TOP_MODULES.get(parts[1], DEFINITIONS)


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    typing_only = {
        id(sub)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test)
        for sub in ast.walk(node)
    }
    mod = _module(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("dbos_agents")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("dbos_agents"):
                found |= {f"{target}.{a.name}" for a in node.names} | {target}
    return found


def _through_inits(target: str) -> set[str]:
    """The target and the packages whose ``__init__`` runs on the way to it."""
    parts = target.split(".")
    return {".".join(parts[:i]) for i in range(2, len(parts) + 1)}


MODULES = {_module(p): p for p in PKG.rglob("*.py")}
GRAPH = {
    m: {
        t
        for imported in _imports(p)
        for t in _through_inits(imported)
        if t in MODULES and t != m and not m.startswith(t + ".")
    }
    for m, p in MODULES.items()
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_to_the_same_layer_or_below(module: str) -> None:
    mine = layer(module)
    upward = sorted(t for t in GRAPH[module] if layer(t) not in {mine} | BELOW[mine])
    assert upward == [], f"{module} ({mine}) imports {[(t, layer(t)) for t in upward]}"


def test_the_import_graph_has_no_cycle() -> None:
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(GRAPH[m]):
            if state.get(t) == 1:
                raise AssertionError(" -> ".join([*path[path.index(t) :], t]))
            if t not in state:
                visit(t)
        path.pop()
        state[m] = 2

    for m in sorted(GRAPH):
        if m not in state:
            visit(m)


def test_the_check_sees_an_upward_import() -> None:
    """The layer rule can fail: the store importing the loop would be refused."""
    assert "loop" not in BELOW["store"] and layer("dbos_agents.loop.turn") == "loop"
    assert layer("dbos_agents.store.calls") == "store" and layer("dbos_agents.agent") == DEFINITIONS
    assert "store" not in BELOW["server"] and layer("dbos_agents.live.reducer") == "live"


def test_the_graph_sees_a_package_init_on_the_way() -> None:
    """``from ..calls.base import X`` runs ``calls/__init__`` first: an arrow to it."""
    assert _through_inits("dbos_agents.loop.calls.base.RunInterrupted") >= {
        "dbos_agents.loop.calls",
        "dbos_agents.loop.calls.base",
    }
