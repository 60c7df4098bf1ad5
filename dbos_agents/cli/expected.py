"""What answer a client tool expects, for a person at a terminal: a one-line sketch of its
output schema and a minimal example result that validates against it.

A wait stores its tool's output JSON schema (pydantic's); an operator reading ``pending``
needs to know what to type, and an example that passes ``submit`` as printed is the
shortest explanation. The example holds the required fields only, each a placeholder of its
type that honours the schema's bounds, formats and simple patterns; it is checked with the
validator ``submit`` uses (formats included), and when it does not pass there is none.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema

from ..messages import JSONValue

Schema = Mapping[str, Any]

FORMATS: dict[str, str] = {
    "date-time": "2025-01-01T00:00:00Z",
    "date": "2025-01-01",
    "time": "12:00:00Z",
    "duration": "P1D",
    "email": "user@example.com",
    "idn-email": "user@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "uri": "https://example.com",
    "iri": "https://example.com",
    "uri-reference": "https://example.com",
    "iri-reference": "https://example.com",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "json-pointer": "",
    "regex": ".*",
}
"""A valid value per JSON Schema format (``submit`` checks formats)."""

PLACEHOLDER = "..."
MAX_DEPTH = 16


@dataclass(frozen=True)
class Example:
    """An example value (``None`` is JSON null, itself a valid example)."""

    value: JSONValue


class _None(Exception):
    """No example under this branch."""


def example(schema: Schema) -> Example | None:
    """A minimal value that validates against ``schema``, or None when none was found."""
    try:
        value = _Walk(schema).value(schema, frozenset(), 0)
    except (_None, re.error, RecursionError, TypeError, ValueError, KeyError):
        return None
    return Example(value) if _valid(schema, value) else None


def _valid(schema: Schema, value: object) -> bool:
    try:
        validator = jsonschema.Draft202012Validator(
            schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
        )
        return validator.is_valid(value)
    except jsonschema.exceptions.SchemaError:
        return False


class _Walk:
    """Resolves local ``$ref``s against the root schema while generating or sketching."""

    def __init__(self, root: Schema) -> None:
        self.root = root
        self.defs = {k: root[k] for k in ("$defs", "definitions") if k in root}
        """What a branch, checked on its own, needs to resolve its ``$ref``s."""

    def resolve(self, s: Any, seen: frozenset[str]) -> tuple[Schema, frozenset[str]]:
        """``s`` with its ``$ref`` followed (siblings win); ``seen`` names the refs on the
        path, so a recursive model ends instead of looping."""
        if s is True:
            return {}, seen
        if s is False:
            raise _None
        while isinstance(s, Mapping) and isinstance(s.get("$ref"), str):
            ref = s["$ref"]
            if ref in seen:
                raise _None
            seen = seen | {ref}
            target: Any = self.root
            for part in ref.removeprefix("#").strip("/").split("/"):
                if part:
                    target = target[part.replace("~1", "/").replace("~0", "~")]
            s = {**target, **{k: v for k, v in s.items() if k != "$ref"}}
        if not isinstance(s, Mapping):
            raise _None
        if "allOf" in s:
            merged: dict[str, Any] = {k: v for k, v in s.items() if k != "allOf"}
            for part in s["allOf"]:
                sub, seen = self.resolve(part, seen)
                merged = _merge(merged, sub)
            return self.resolve(merged, seen)
        return s, seen

    def value(self, schema: Any, seen: frozenset[str], depth: int) -> JSONValue:
        if depth > MAX_DEPTH:
            raise _None
        s, seen = self.resolve(schema, seen)
        if "const" in s:
            const: JSONValue = s["const"]
            return const
        if "enum" in s:
            if not s["enum"]:
                raise _None
            first: JSONValue = s["enum"][0]
            return first
        for key in ("anyOf", "oneOf"):
            if key in s:
                rest = {k: v for k, v in s.items() if k != key}
                return self._first_branch([_merge(rest, b) for b in s[key]], seen, depth)
        types = s.get("type", _infer(s))
        if isinstance(types, list):
            ordered = [t for t in types if t != "null"] + [t for t in types if t == "null"]
            return self._first_branch([{**s, "type": t} for t in ordered], seen, depth)
        return self._of_type(types, s, seen, depth)

    def _first_branch(self, branches: list[Any], seen: frozenset[str], depth: int) -> JSONValue:
        """The first branch's example that validates against that branch."""
        for branch in branches:
            try:
                value = self.value(branch, seen, depth + 1)
            except _None:
                continue
            if _valid({**self.defs, **_as_schema(branch)}, value):
                return value
        raise _None

    def _of_type(self, t: str | None, s: Schema, seen: frozenset[str], depth: int) -> JSONValue:
        if t == "null":
            return None
        if t == "boolean":
            return True
        if t in ("integer", "number"):
            return _number(s, integer=t == "integer")
        if t == "string":
            return _string(s)
        if t == "array":
            count = int(s.get("minItems", 0))
            prefix = list(s.get("prefixItems", []))
            items = [self.value(p, seen, depth + 1) for p in prefix[:count]]
            while len(items) < count:
                items.append(self.value(s.get("items", {}), seen, depth + 1))
            return items
        if t == "object" or t is None:
            props = s.get("properties", {})
            extra = s.get("additionalProperties", {})
            return {
                name: self.value(props.get(name, extra), seen, depth + 1)
                for name in s.get("required", [])
            }
        raise _None


def _as_schema(branch: Any) -> dict[str, Any]:
    if isinstance(branch, Mapping):
        return dict(branch)
    return {} if branch is True else {"not": {}}


def _merge(a: Mapping[str, Any], b: Any) -> dict[str, Any]:
    """Two schemas that both apply, as one (properties and required lists combined)."""
    if not isinstance(b, Mapping):
        return dict(a) if b is True else {**a, "not": {}}
    merged = {**a, **b}
    if "properties" in a and "properties" in b:
        merged["properties"] = {**a["properties"], **b["properties"]}
    if "required" in a and "required" in b:
        merged["required"] = list(dict.fromkeys([*a["required"], *b["required"]]))
    return merged


def _infer(s: Schema) -> str | None:
    """The type a schema without ``type`` implies by its keywords (None: an object)."""
    if {"items", "prefixItems", "minItems"} & s.keys():
        return "array"
    if {"minLength", "maxLength", "pattern", "format"} & s.keys():
        return "string"
    if {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"} & s.keys():
        return "number"
    return None


def _number(s: Schema, *, integer: bool) -> int | float:
    lo, lo_open = s.get("minimum"), False
    if "exclusiveMinimum" in s and (lo is None or s["exclusiveMinimum"] >= lo):
        lo, lo_open = s["exclusiveMinimum"], True
    hi, hi_open = s.get("maximum"), False
    if "exclusiveMaximum" in s and (hi is None or s["exclusiveMaximum"] <= hi):
        hi, hi_open = s["exclusiveMaximum"], True
    value: float = 0
    if lo is not None and (value < lo or (lo_open and value <= lo)):
        value = lo if not lo_open else (lo + 1 if hi is None or lo + 1 < hi else (lo + hi) / 2)
    elif hi is not None and (value > hi or (hi_open and value >= hi)):
        value = hi if not hi_open else hi - 1
    step = s.get("multipleOf")
    if step:
        value = math.ceil(value / step) * step
        if lo_open and lo is not None and value <= lo:
            value += step
    if integer:
        value = math.ceil(value)
    return int(value) if float(value).is_integer() else float(value)


def _string(s: Schema) -> str:
    if "pattern" in s:
        text = pattern_example(s["pattern"])
    else:
        text = FORMATS.get(str(s.get("format")), PLACEHOLDER)
    low = int(s.get("minLength", 0))
    if len(text) < low:
        text += "." * (low - len(text))
    if "maxLength" in s and "format" not in s:
        text = text[: int(s["maxLength"])]
    return text


def pattern_example(pattern: str) -> str:
    """A short string matching a simple regular expression (classes, repeats, groups,
    alternatives: the first of each; anchors and lookarounds add nothing)."""
    from re import _parser  # type: ignore[attr-defined]  # the stdlib's own regex parser

    return _emit(_parser.parse(pattern))


_CATEGORY = {"CATEGORY_DIGIT": "0", "CATEGORY_WORD": "a", "CATEGORY_SPACE": " "}


def _emit(parsed: Any) -> str:
    out = []
    for op, arg in parsed:
        name = str(op)
        if name == "LITERAL":
            out.append(chr(arg))
        elif name == "ANY":
            out.append("a")
        elif name == "IN":
            out.append(_class(arg))
        elif name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
            low, _high, item = arg
            out.append(_emit(item) * low)
        elif name in ("SUBPATTERN", "ATOMIC_GROUP"):
            out.append(_emit(arg[-1]))
        elif name == "BRANCH":
            out.append(_emit(arg[1][0]))
        elif name in ("AT", "ASSERT", "ASSERT_NOT"):
            continue  # checked by the validator at the end
        else:
            raise _None
    return "".join(out)


def _class(items: Any) -> str:
    if items and str(items[0][0]) == "NEGATE":
        for c in "a0_- .":  # a character the class does not exclude
            if not re.fullmatch(_unparse_negated(items), c):
                continue
            return c
        raise _None
    op, arg = items[0]
    name = str(op)
    if name == "LITERAL":
        return chr(arg)
    if name == "RANGE":
        return chr(arg[0])
    if name == "CATEGORY":
        return _CATEGORY.get(str(arg), "a")
    raise _None


def _unparse_negated(items: Any) -> str:
    """A negated class back as a pattern, to test candidate characters against."""
    parts = []
    for op, arg in items[1:]:
        name = str(op)
        if name == "LITERAL":
            parts.append(re.escape(chr(arg)))
        elif name == "RANGE":
            parts.append(f"{re.escape(chr(arg[0]))}-{re.escape(chr(arg[1]))}")
        elif name == "CATEGORY":
            parts.append({"CATEGORY_DIGIT": r"\d", "CATEGORY_WORD": r"\w"}.get(str(arg), r"\s"))
    return f"[^{''.join(parts)}]"


def sketch(schema: Schema) -> str:
    """The schema in one line a person reads: ``{"ok": boolean, "note"?: string}``
    (``?``: optional; ``|``: either; ``[x]``: a list of x; a format in parentheses)."""
    try:
        return _Sketch(schema).of(schema, frozenset())
    except (_None, RecursionError, TypeError, KeyError):
        return "any JSON"


class _Sketch(_Walk):
    def of(self, schema: Any, seen: frozenset[str]) -> str:
        try:
            s, seen = self.resolve(schema, seen)
        except _None:
            ref = schema.get("$ref", "") if isinstance(schema, Mapping) else ""
            return str(ref).rsplit("/", 1)[-1] or "nothing"
        if "const" in s:
            return json.dumps(s["const"])
        if "enum" in s:
            return " | ".join(json.dumps(v) for v in s["enum"])
        for key in ("anyOf", "oneOf"):
            if key in s:
                return " | ".join(dict.fromkeys(self.of(b, seen) for b in s[key]))
        types = s.get("type", _infer(s))
        if isinstance(types, list):
            return " | ".join(self.of({**s, "type": t}, seen) for t in types)
        if types == "array":
            items = s.get("items")
            return f"[{self.of(items, seen)}]" if items not in (None, True, {}) else "array"
        if types == "string":
            return f"string ({s['format']})" if "format" in s else "string"
        if types not in (None, "object"):
            return str(types)
        props = s.get("properties")
        if not props:
            return "object" if s.get("type") == "object" else "any JSON"
        # Required fields first, in their list's order: a stored schema (jsonb) has its
        # properties reordered, its lists not.
        required = [k for k in s.get("required", []) if k in props]
        names = [*required, *(k for k in props if k not in required)]
        fields = (
            f"{json.dumps(k)}{'' if k in required else '?'}: {self.of(props[k], seen)}"
            for k in names
        )
        return "{" + ", ".join(fields) + "}"
