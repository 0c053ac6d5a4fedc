"""The configuration layer's engine: typed sections validated at construction, one flattener, one ``--set`` grammar.

Every configuration in simlab (task, harness, policy, base, train, eval) is a **section**: a frozen
pydantic model, a subclass of :class:`Section`. pydantic validates it whenever one is built, also by
:meth:`Section.replace`, strictly (:data:`~simlab.rules.STRICT`); each field's annotation says what it
allows with pydantic's own constraints (:mod:`simlab.rules`)::

    window: Annotated[int, Field(ge=8, le=TOKENS_MAX)] = 128  # W: the working window, in tokens

A value that passes is kept as written (an integer given for a float stays an integer, so a resolved
config logs and hashes exactly as written); one that fails becomes one
:class:`~simlab.errors.ConfigError` that names the full key path (``harness.window``), the bad value and
what the annotation allows. Checks that involve several fields go in :meth:`Section.check`, which runs
after every field has passed its own.

Also here: :func:`flatten`, the one flattener (run params, the sweep spec's settings, MLflow params
and the report all use key paths ``section.key``), and the ``--set KEY=VALUE`` grammar
(:func:`parse_value`, :func:`parse_overrides`, :func:`set_path`) shared by ``simlab train``,
``simlab inspect`` and the sweep spec. This module imports nothing from simlab but its errors and rules.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Self

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from simlab.errors import ConfigError
from simlab.refusals import refusal
from simlab.rules import STRICT, check_value, fields_of
from simlab.rules import plain as plain_number


# ----------------------------------------------------------------------------------------- sections
class Section(BaseModel):
    """Base of every configuration section: a frozen pydantic model, checked strictly when built.

    The key prefix (:attr:`SECTION`) names errors; :meth:`check` holds the rules across fields (a
    ``model_validator`` runs it once every field passed its own); a failure comes out of the constructor
    as one :class:`~simlab.errors.ConfigError` naming ``<SECTION>.<field>``.
    """

    model_config = ConfigDict(
        **STRICT, extra="forbid", frozen=True, arbitrary_types_allowed=True, use_attribute_docstrings=True
    )
    SECTION: ClassVar[str] = ""
    """Key-path prefix of the section's fields (``harness``); errors name ``<SECTION>.<field>``."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**{k: plain_number(v) for k, v in data.items()})
        except ValidationError as exc:  # a ConfigError from check() is no ValueError: it passes through as it is
            raise refusal(self.SECTION, type(self), exc.errors(include_url=False)[0]) from None

    @model_validator(mode="after")
    def _across_fields(self) -> Self:
        self.check()
        return self

    def check(self) -> None:
        """Rules that involve several fields; runs once every field passed its own rule."""

    def invalid(self, name: str, allowed: str, *, suffix: str = "", involves: tuple[str, ...] = ()) -> ConfigError:
        """The error for field ``name`` (its current value) under this section's prefix; ``involves``: the key
        paths of the other settings the broken rule relates it to (``ConfigError.involves``)."""
        value = getattr(self, name)
        if suffix:
            value = value[int(suffix.strip("[]"))]
        return ConfigError.invalid(self.key(name) + suffix, value, allowed, involves=involves)

    @classmethod
    def key(cls, name: str) -> str:
        """The key path of field ``name``: ``harness.window``."""
        return f"{cls.SECTION}.{name}" if cls.SECTION else name

    @classmethod
    def allows(cls, name: str) -> Any:
        """Field ``name``'s annotation with its constraints: what :func:`~simlab.rules.check_value` validates
        (and, on a refusal, reads the JSON schema of)."""
        return fields_of(cls)[name]

    @classmethod
    def default(cls, name: str) -> Any:
        """Field ``name``'s default value."""
        return cls.model_fields[name].default

    @classmethod
    def check_fields(cls, data: Mapping[str, Any]) -> None:
        """Check settings one by one before they are combined (unknown keys, each field's annotation).

        For the settings a user gives: a value of the wrong kind is refused by its own key before any
        preset or recipe arithmetic reads it.
        """
        names = cls.field_names()
        for name, value in data.items():
            if name not in names:
                raise ConfigError.unknown(cls.key(name), names)
            check_value(cls.key(name), value, cls.allows(name))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The section's field names, in declaration order."""
        return tuple(cls.model_fields)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied and validated (pydantic's ``model_copy`` validates nothing); an
        unknown key is refused by ``extra="forbid"``, naming the valid ones."""
        return type(self)(**{**dict(self), **changes})


# ---------------------------------------------------------------------------------- key paths
def flatten(
    nested: Mapping[str, Any], *, prefix: str = "", leaf: Callable[[Mapping[str, Any]], bool] | None = None
) -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``: the one flattener behind run params, MLflow params and
    the sweep spec's settings. A mapping stays whole where ``leaf(mapping)`` says so (a spec's
    ``{type = "float", ...}`` range); lists and every other value are leaves."""
    out: dict[str, Any] = {}
    for key, value in nested.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(value, Mapping) and not (leaf is not None and leaf(value)):
            out.update(flatten(value, prefix=path, leaf=leaf))
        else:
            out[path] = value
    return out


def loggable(value: Any) -> str | int | float | bool:
    """A flattened value as a run param: scalars as they are, everything else (tuples, None) as text."""
    return value if isinstance(value, (int, float, str, bool)) else str(value)


def parse_value(text: str) -> Any:
    """A ``--set`` value as TOML reads it (numbers, booleans, arrays, inline tables); else a string.

    ``nan`` and ``inf`` parse as floats, so the field's check refuses them by name.
    """
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def parse_overrides(items: Iterable[str], *, option: str = "--set") -> dict[str, Any]:
    """``["train.lr=1e-3", ...]`` -> ``{"train.lr": 0.001}``; a malformed item names itself."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError(
                f"`{option} {item}` is invalid; write key=value, e.g. {option} train.lr=0.001",
                key=option, value=item, allowed="write key=value",
            )
        out[key] = parse_value(value.strip())
    return out


def read_toml(path: Path | str, what: str = "config file", error: type[ConfigError] = ConfigError) -> dict[str, Any]:
    """A TOML file's contents; a missing file, a folder, a binary file or bad TOML is an ``error`` naming
    ``what`` (the option or argument) and the path."""
    path = Path(path)
    shown = str(path)
    if path.is_dir():
        raise error.invalid(what, shown, "it is a folder; give a TOML file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise error.invalid(what, shown, "it does not exist") from None
    except UnicodeDecodeError:
        raise error.invalid(what, shown, "it is not UTF-8 text (a binary file?); give a TOML file") from None
    except OSError as exc:
        raise error.invalid(what, shown, f"it cannot be read ({exc.strerror or exc})") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise error.invalid(what, shown, f"it is not valid TOML: {exc}") from None


def set_path(nested: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested dict, making tables on the way; a value in the way is an error."""
    *head, last = path.split(".")
    table = nested
    for i, part in enumerate(head):
        table = table.setdefault(part, {})
        if not isinstance(table, dict):
            where = ".".join(head[: i + 1])
            raise ConfigError.invalid(where, table, "it must be a table of settings")
    table[last] = value


__all__ = [
    "Section", "flatten", "loggable", "parse_overrides", "parse_value", "read_toml", "set_path",
]
