"""Reading exported spans in a test: as dicts (``inmemory_run``'s lines, or OTLP protobuf
decoded by ``receiver``), and as an indented tree for a reader."""

from __future__ import annotations

from typing import Any

Span = dict[str, Any]


def children(spans: list[Span], parent: Span) -> list[Span]:
    return sorted((s for s in spans if s["parent"] == parent["id"]), key=lambda s: s["start"])


def named(spans: list[Span], name: str) -> list[Span]:
    return [s for s in spans if s["name"] == name]


def one(spans: list[Span], name: str) -> Span:
    found = named(spans, name)
    assert len(found) == 1, f"{len(found)} spans named {name!r}: {[s['name'] for s in spans]}"
    return found[0]


_SHOWN = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "dbos_agents.tool.outcome",
    "dbos_agents.wait.end",
    "dbos_agents.run.status",
)


def tree(spans: list[Span]) -> str:
    """The spans as an indented tree, roots first (a root: a span whose parent is absent)."""
    ids = {s["id"] for s in spans}
    out: list[str] = []

    def show(s: Span, depth: int) -> None:
        ms = (s["end"] - s["start"]) / 1e6
        attrs = " ".join(f"{k.rsplit('.', 1)[-1]}={s['attributes'][k]}" for k in _SHOWN
                         if k in s["attributes"])  # fmt: skip
        links = f" links={len(s['links'])}" if s["links"] else ""
        out.append(f"{'  ' * depth}{s['name']}  [{ms:.0f} ms] {attrs}{links}".rstrip())
        for c in children(spans, s):
            show(c, depth + 1)

    for root in sorted((s for s in spans if s["parent"] not in ids), key=lambda s: s["start"]):
        out.append(f"trace {root['trace']} (parent {root['parent']})")
        show(root, 1)
    return "\n".join(out)
