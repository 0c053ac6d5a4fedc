"""The settings page (docs/settings.md): every run setting with its key path, default, what it allows and what it
does, generated from the sections' own pydantic schema so that it cannot drift from the code.

``python -m simlab.analysis.settings_page > docs/settings.md`` writes it; tests/test_settings_page.py fails
where the page and the code differ.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from simlab.analysis.tables import markdown_table
from simlab.config import DEFAULT_PRESET, RunConfig
from simlab.tasks.config import KeyRecallConfig, PeekReadConfig, PointerChaseConfig, TaskConfig

TASKS: tuple[type[TaskConfig], ...] = (KeyRecallConfig, PeekReadConfig, PointerChaseConfig)
"""The task families whose own fields follow the fields every task has."""
DERIVED = ("preset",)
"""A top-level field written under a section: the preset is ``task.preset`` (``env_id`` follows from it)."""
BOUNDS = (("minimum", ">="), ("exclusiveMinimum", ">"), ("gt", ">"), ("ge", ">="), ("maximum", "<="),
          ("exclusiveMaximum", "<"), ("lt", "<"), ("le", "<="))
"""JSON-schema (and pydantic) bound keywords, as they are written in the page."""
HEADER = """# Settings

Every setting of a run, by its key path: what `--set KEY=VALUE`, a run config's `[section]` table and a sweep
spec's `[base]`, `[space]` and `[[variants]]` write. Generated from the code
(`python -m simlab.analysis.settings_page > docs/settings.md`; a test fails where they differ). A bad value is
refused with one line naming the key, the value and what is allowed (exit 2); the preset (`task.preset`) sets
many of these first, and your settings go above it.
"""


def fields(model: type[BaseModel], prefix: str, skip: Iterable[str] = (),
           only: Iterable[str] | None = None) -> list[list[str]]:
    """One table row per field of ``model`` (those in ``only``, less ``skip``): key path, type, default, allowed,
    description."""
    schema = model.model_json_schema()
    rows = []
    for name, prop in schema.get("properties", {}).items():
        if name in set(skip) or "$ref" in prop or (only is not None and name not in set(only)):
            continue
        info = model.model_fields[name]
        description = " ".join((info.description or prop.get("description") or "").split())
        rows.append([f"`{prefix}{name}`", _type(prop), f"`{_default(info.default)}`", _allowed(prop), description])
    return rows


def _type(prop: dict[str, Any]) -> str:
    if "anyOf" in prop:
        kinds = list(dict.fromkeys(_type(p) for p in prop["anyOf"]))
        if "integer" in kinds and "number" in kinds:  # an int is a number (a float field takes both)
            kinds.remove("integer")
        return " or ".join(kinds)
    if prop.get("type") == "array" and "prefixItems" in prop:
        return "[" + ", ".join(_type(p) for p in prop["prefixItems"]) + "]"
    if "enum" in prop:
        return "string"
    return str(prop.get("type", prop.get("const", "any")))


def _allowed(prop: dict[str, Any]) -> str:
    """The field's own words for what it allows, else its bounds or choices."""
    if "x-simlab-allowed" in prop:
        return str(prop["x-simlab-allowed"])
    if "enum" in prop:
        return "one of " + ", ".join(f"`{v}`" for v in prop["enum"])
    parts = [f"{word} {prop[key]}" for key, word in BOUNDS if key in prop]
    for inner in prop.get("anyOf", []) + prop.get("prefixItems", []):
        inner_allowed = _allowed(inner)
        if inner_allowed and inner_allowed not in parts:
            parts.append(inner_allowed)
    return ", ".join(parts)


def _default(value: Any) -> str:
    if value is PydanticUndefined:
        return "(required)"
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def settings_markdown() -> str:
    """The whole page: the top-level settings, then each section's, then each task family's own."""
    head = ["key", "type", "default", "allowed", "what it does"]
    top = fields(RunConfig, "", skip=(*DERIVED, "env_id"))  # env_id follows from the preset
    out = [HEADER, "## Top level\n", markdown_table(head, top)]
    for name, info in RunConfig.model_fields.items():
        section = info.annotation
        if not (isinstance(section, type) and issubclass(section, BaseModel)):
            continue
        rows = fields(section, f"{name}.")
        if section is TaskConfig:  # the preset, written task.preset, leads the task's settings
            preset = fields(RunConfig, f"{name}.", only=DERIVED)[0]
            rows = [[*preset[:2], f"`{json.dumps(DEFAULT_PRESET)}`", *preset[3:]], *rows]
        out += [f"## `{name}`\n", markdown_table(head, rows)]
        if section is TaskConfig:
            common = frozenset(TaskConfig.model_fields)
            for task in TASKS:
                out += [f"### `{name}` fields of {task.__name__}\n",
                        markdown_table(head, fields(task, f"{name}.", skip=common))]
    return "\n\n".join(part.strip("\n") for part in out) + "\n"


if __name__ == "__main__":
    print(settings_markdown(), end="")
