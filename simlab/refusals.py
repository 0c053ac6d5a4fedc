"""What a refusal says: pydantic's error, located and explained through the JSON schema of what failed.

pydantic's own message names the broken constraint only (``Input should be greater than or equal to 8``);
the house's one line names the key path, the bad value and everything allowed (both bounds, the choices,
the keys of a table). Both come from pydantic: the error's location, followed through the value's JSON
schema (:func:`json_schema`, ``model_json_schema`` for a section), gives the key path, and the schema
there gives what is allowed (:func:`says`). simlab's own validators (:mod:`simlab.rules`) write their text
into the schema under :data:`SAYS`; a registry's names are read when the value fails.

Also the texts every check shares: :func:`int_text`, :func:`real_text`, :func:`choices_text`. This module
imports nothing from simlab but its errors.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, cast

from pydantic import TypeAdapter
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import ErrorDetails, core_schema

from simlab.errors import ConfigError, UnknownNameError

CUSTOM = "simlab"
"""pydantic error type of simlab's own validators; its context holds the text :func:`refusal` quotes."""
SAYS = "x-simlab-allowed"
"""JSON-schema key where simlab's own validators (and :class:`~simlab.rules.Says`) write what they allow."""
NAMES = "x-simlab-names"
"""JSON-schema key marking a value a registry holds (:class:`~simlab.rules.Names`): its refusal is an unknown name."""


_BIG = {2**e: f"2**{e}" for e in range(16, 65)} | {2**e - 1: f"2**{e} - 1" for e in range(17, 65)}
"""Bounds people read, from 2**16 on: ``2**31 - 1`` rather than 2147483647."""


def int_text(lo: int, hi: int) -> str:
    """``choose an integer in [lo, hi]``, or ``>= lo (at most 2**31 - 1)`` for a bound nobody meets."""
    if hi in _BIG:
        return f"choose an integer >= {lo} (at most {_BIG[hi]})"
    return f"choose an integer in [{lo}, {hi}]"


def real_text(lo: float, hi: float, lo_open: bool, hi_open: bool) -> str:
    """``choose a value in [lo, hi]`` (brackets by openness), or ``choose a finite value > lo``."""
    if math.isinf(hi) and math.isinf(lo):
        return "choose a finite number"
    if math.isinf(hi):
        return f"choose a finite value {'>' if lo_open else '>='} {lo:g}"
    return f"choose a value in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def choices_text(choices: Iterable[Any]) -> str:
    """The choices quoted and joined: ``'a', 'b'``."""
    return ", ".join(repr(c) for c in choices)


# ------------------------------------------------------------------- what failed, and what is allowed
class _Schema(GenerateJsonSchema):
    """pydantic's JSON schema, also for a value only an ``isinstance`` check describes."""

    def is_instance_schema(self, schema: core_schema.IsInstanceSchema) -> JsonSchemaValue:
        return {SAYS: f"give a {schema['cls'].__name__}"}

    def json_or_python_schema(self, schema: core_schema.JsonOrPythonSchema) -> JsonSchemaValue:
        """An ``InstanceOf[X]`` field takes an X, not the table X is read from."""
        python = schema["python_schema"]
        if python["type"] == "is-instance":
            return self.is_instance_schema(cast(core_schema.IsInstanceSchema, python))
        return super().json_or_python_schema(schema)


def json_schema(tp: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The JSON schema of annotation ``tp`` (pydantic's, with simlab's own validators' :data:`SAYS`) and
    its ``$defs``. Built when a value fails, never cached: a registry's names are read as they are now."""
    js = TypeAdapter(tp).json_schema(schema_generator=_Schema)
    return js, js.get("$defs", {})


def _node(js: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """``js`` with its ``$ref`` resolved (a model's own schema)."""
    ref = js.get("$ref")
    return {**defs[ref.rsplit("/", 1)[-1]], **{k: v for k, v in js.items() if k != "$ref"}} if ref else js


_BOUNDS = {"ge": (0, False), "gt": (0, True), "le": (1, False), "lt": (1, True),
           "minimum": (0, False), "exclusiveMinimum": (0, True), "maximum": (1, False), "exclusiveMaximum": (1, True)}
"""The bound keys of a JSON schema (pydantic writes ``ge``... beside a union): which side each bounds (0 low,
1 high) and whether it is open."""


def _members(js: dict[str, Any]) -> list[dict[str, Any]]:
    """A union's members other than null, each with the constraints the union carries (pydantic writes
    ``ge``/``le`` of an ``int | float`` beside its ``anyOf``); ``[js]`` for a schema that is no union."""
    if "anyOf" not in js:
        return [js]
    around = {k: v for k, v in js.items() if k in _BOUNDS}
    return [{**m, **around} if "anyOf" in m else m for m in js["anyOf"] if m.get("type") != "null"]


def _bounds(js: dict[str, Any]) -> tuple[float, float, bool, bool]:
    """(lo, hi, lo_open, hi_open) of a schema's bounds; a side without one is infinite."""
    sides = [(-math.inf, False), (math.inf, False)]
    for key, (side, is_open) in _BOUNDS.items():
        if key in js:
            sides[side] = (float(js[key]), is_open)
    (lo, lo_open), (hi, hi_open) = sides
    return lo, hi, lo_open, hi_open


def says(js: dict[str, Any], defs: dict[str, Any]) -> str:
    """What a JSON schema allows, as an error says it: ``choose an integer in [8, 65536]``."""
    js = _node(js, defs)
    if SAYS in js:
        return str(js[SAYS])
    if "anyOf" in js:
        return _says_union(js, defs)
    if "const" in js or "enum" in js:
        choices = [js["const"]] if "const" in js else js["enum"]
        return f"choose {choices_text(choices)}" if len(choices) == 1 else f"choose one of {choices_text(choices)}"
    kind = js.get("type")
    if kind == "boolean":
        return "choose true or false"
    if kind == "integer":
        lo, hi = _bounds(js)[:2]
        return int_text(int(lo), int(hi)) if math.isfinite(lo) and math.isfinite(hi) else "choose an integer"
    if kind == "number":
        return real_text(*_bounds(js))
    return _says_container(js, defs)


def _says_union(js: dict[str, Any], defs: dict[str, Any]) -> str:
    """What a union allows: an optional value, a real number (``int | float``), or one of its members."""
    members = _members(js)
    if len(members) < len(js["anyOf"]):
        inner = members[0] if len(members) == 1 else {"anyOf": members}
        return f"{says(inner, defs)}, or leave it unset"
    if sorted(m.get("type", "") for m in members) == ["integer", "number"] and all(len(m) == 1 for m in members):
        return real_text(*_bounds(js))
    texts = [says(m, defs) for m in members]
    verb = texts[0].split(" ", 1)[0]
    return f"{verb} " + " or ".join(t.removeprefix("choose ").removeprefix("give ") for t in texts)


def _says_container(js: dict[str, Any], defs: dict[str, Any]) -> str:
    """What a string, a pair, a list, a table or a record of fields allows."""
    kind = js.get("type")
    if kind == "array" and "prefixItems" in js:
        each = says(js["prefixItems"][0], defs).removeprefix("choose an integer in ")
        return f"give a (min, max) pair of integers in {each}"
    if kind == "array":
        item = says(js.get("items", {}), defs).removeprefix("give ").removeprefix("choose ")
        return f"give a {'non-empty ' if js.get('minItems') else ''}list, each item: {item}"
    if kind == "object" and "properties" in js:
        return f"give a table with keys {choices_text(js['properties'])}"
    if kind == "object":
        return "give a table of key = value"
    if kind == "string":
        return "give a string"
    return f"give a {js.get('title', 'value')}"


def _walk(js: dict[str, Any], defs: dict[str, Any], loc: tuple[Any, ...]) -> tuple[list[str | int], dict[str, Any]]:
    """The places ``loc`` names in a value of schema ``js`` (fields, table keys, items) and the schema at the
    last of them; the walk stops at a union of several members (the union is what the value failed) and at a
    key that is not a field."""
    path: list[str | int] = []
    for part in loc:
        members = _members(_node(js, defs))
        if len(members) > 1:
            break
        node = _node(members[0], defs)
        items, fields = node.get("prefixItems"), node.get("properties")
        if isinstance(part, int) and node.get("type") == "array":
            js = items[part] if items and part < len(items) else node.get("items", {})
        elif isinstance(part, str) and node.get("type") == "object" and fields is None:
            js = node.get("additionalProperties", {})
        elif isinstance(part, str) and fields is not None and part in fields:
            js = fields[part]
        else:
            break  # a union member's tag: what the value failed is js as a whole (an optional one included)
        path.append(part)
    return path, _node(js, defs)


def key_path(where: str, path: list[str | int]) -> str:
    """``where`` followed by ``path``: ``variants[0].name``, ``task.horizon[1]``."""
    out = where
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def refusal(where: str, tp: Any, err: ErrorDetails, error: type[ConfigError] = ConfigError) -> ConfigError:
    """One of pydantic's errors for the value at ``where`` (annotated ``tp``) as one ``ConfigError``.

    The key path follows the error's location through the JSON schema into fields, table keys and items
    (``task.horizon[1]``). A simlab validator's error quotes its own text; an unknown key lists the known
    ones; any other says what the schema there allows (:func:`says`). A refused name is an
    ``UnknownNameError`` (unless ``error`` is more specific).
    """
    js, defs = json_schema(tp)
    path, at = _walk(js, defs, tuple(err["loc"]))
    key, ctx, stopped = key_path(where, path), err.get("ctx") or {}, len(path) < len(err["loc"])
    if error is ConfigError and at.get(NAMES):
        error = UnknownNameError
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        return error.unknown(key_path(key, [err["loc"][-1]]), list(at.get("properties", {})))
    if err["type"] in ("missing", "missing_argument"):
        return error(f"`{key}` is required; give it a value", key=key, allowed="give it a value")
    if err["type"] == CUSTOM and not (stopped and "anyOf" in at):
        return error.invalid(key + ctx.get("suffix", ""), ctx.get("value", err["input"]), ctx["allowed"])
    return error.invalid(key, err["input"], says(at, defs))


__all__ = [
    "CUSTOM", "NAMES", "SAYS", "choices_text", "int_text", "json_schema", "key_path", "real_text", "refusal",
    "says",
]
