"""The configuration layer's engine: typed sections validated at construction, one flattener, one ``--set`` grammar.

Every configuration in simlab (task, harness, policy, base, train, eval) is a **section**: a frozen
dataclass declared with :func:`section`. pydantic validates it whenever one is built, also by
``dataclasses.replace`` and :meth:`Section.replace`; each field's annotation carries a :class:`Rule`
that says what the field allows::

    window: Annotated[int, IntIn(8, TOKENS_MAX)] = 128  # W: the working window

A rule returns the value unchanged (an integer given for a float stays an integer, so a resolved config
logs and hashes exactly as written) or fails with what is allowed, and the section raises one
:class:`~simlab.errors.ConfigError` that names the full key path (``harness.window``), the bad value
and that text. Checks that involve several fields go in :meth:`Section.check`, which runs after every
field has passed its own rule.

Also here: :func:`flatten`, the one flattener (run params, the sweep spec's settings, MLflow params
and the report all use key paths ``section.key``), and the ``--set KEY=VALUE`` grammar
(:func:`parse_value`, :func:`parse_overrides`, :func:`set_path`) shared by ``simlab train``,
``simlab inspect`` and the sweep spec. This module imports nothing from simlab but its errors.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import Any, ClassVar, NoReturn, Protocol, Self, TypeVar, dataclass_transform

import pydantic
from pydantic import ConfigDict, ValidationError
from pydantic_core import PydanticCustomError, core_schema

from simlab.errors import ConfigError, UnknownNameError

SEED_MAX = 2**32 - 1
"""Largest seed: numpy's legacy generators, torch and every task's instance seeds accept it."""
COUNT_MAX = 2**31 - 1
"""Largest step or update count: a 32-bit index, whatever consumes it."""
BATCH_MAX = 2**20
"""Most rollouts in one batch (episodes, prompts x G): each is an environment and a row of tensors."""
TOKENS_MAX = 2**16
"""Longest window, threshold, summary or tail, in tokens (64K: the papers' largest working window)."""
STEPS_MAX = 2**20
"""Most env steps or compactions a rollout may be allowed."""


# ------------------------------------------------------------------------------------------- rules
class _Bad(Exception):
    """A rule's refusal: what is allowed, and which part of the value failed (``[1]`` of a pair)."""

    def __init__(
        self, allowed: str, suffix: str = "", value: Any = None, *, has_value: bool = False,
        kind: type[ConfigError] = ConfigError,
    ) -> None:
        super().__init__(allowed)
        self.allowed, self.suffix, self.value, self.has_value, self.kind = allowed, suffix, value, has_value, kind


class Rule:
    """What one field allows. ``check`` returns the value (unchanged, or a list made a tuple) or raises.

    Used as ``Annotated[type, rule]``: pydantic calls the rule instead of its own coercion, so nothing
    is converted behind the user's back (no ``"8"`` -> 8, no ``True`` -> 1, no 1 -> 1.0).
    """

    allowed: str = ""
    error: ClassVar[type[ConfigError]] = ConfigError
    """The error type a refusal raises (``UnknownNameError`` for a registered name)."""

    def check(self, value: Any) -> Any:  # pragma: no cover - every rule overrides it
        """``value`` as the field stores it, or raise ``_Bad`` saying what is allowed."""
        raise NotImplementedError

    def refuse(self) -> NoReturn:
        """Refuse the value with this rule's ``allowed`` text."""
        raise _Bad(self.allowed, kind=self.error)

    def __call__(self, value: Any) -> Any:
        """pydantic's plain validator: :meth:`check`, with a refusal as a pydantic error carrying its text."""
        try:
            return self.check(value)
        except _Bad as bad:
            ctx = {"allowed": bad.allowed, "suffix": bad.suffix, "value": bad.value, "has_value": bad.has_value,
                   "kind": bad.kind}
            raise PydanticCustomError("simlab", "{allowed}", ctx) from None

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(self)


def _is_int(value: Any) -> bool:
    return isinstance(value, Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(float(value))


def _big(n: int) -> str:
    """Bounds people read: ``2**31 - 1`` rather than 2147483647."""
    for e in range(16, 65):
        if n == 2**e:
            return f"2**{e}"
        if n == 2**e - 1:
            return f"2**{e} - 1"
    return str(n)


def int_text(lo: int, hi: int) -> str:
    """``choose an integer in [lo, hi]``, or ``>= lo (at most 2**31 - 1)`` for a bound nobody meets."""
    if hi >= 2**16 and _big(hi) != str(hi):
        return f"choose an integer >= {lo} (at most {_big(hi)})"
    return f"choose an integer in [{lo}, {hi}]"


def real_text(lo: float, hi: float, lo_open: bool, hi_open: bool) -> str:
    """``choose a value in [lo, hi]`` (brackets by openness), or ``choose a finite value > lo``."""
    if math.isinf(hi):
        return f"choose a finite value {'>' if lo_open else '>='} {lo:g}"
    return f"choose a value in {'(' if lo_open else '['}{lo:g}, {hi:g}{')' if hi_open else ']'}"


def choices_text(choices: Iterable[Any]) -> str:
    """The choices quoted and joined: ``'a', 'b'``."""
    return ", ".join(repr(c) for c in choices)


@dataclass(frozen=True)
class IntIn(Rule):
    """An integer (not a bool) in ``[lo, hi]``."""

    lo: int
    hi: int = COUNT_MAX

    @property
    def allowed(self) -> str:  # type: ignore[override]
        """What the rule allows, as the error says it."""
        return int_text(self.lo, self.hi)

    def check(self, value: Any) -> Any:
        """The integer itself, or a refusal."""
        if not (_is_int(value) and self.lo <= value <= self.hi):
            self.refuse()
        return value


@dataclass(frozen=True)
class RealIn(Rule):
    """A finite real number (not a bool) in an interval; an integer stays an integer."""

    lo: float
    hi: float = math.inf
    lo_open: bool = False
    hi_open: bool = False

    @property
    def allowed(self) -> str:  # type: ignore[override]
        """What the rule allows, as the error says it."""
        return real_text(self.lo, self.hi, self.lo_open, self.hi_open)

    def check(self, value: Any) -> Any:
        """The number itself (an integer stays one), or a refusal."""
        if not _is_real(value):
            self.refuse()
        v = float(value)
        ok = (v > self.lo if self.lo_open else v >= self.lo) and (v < self.hi if self.hi_open else v <= self.hi)
        if not ok:
            self.refuse()
        return value


@dataclass(frozen=True)
class Flag(Rule):
    """``True`` or ``False`` (not 0 or 1, not a string)."""

    allowed: str = "choose true or false"

    def check(self, value: Any) -> Any:
        """The boolean itself, or a refusal."""
        if not isinstance(value, bool):
            self.refuse()
        return value


@dataclass(frozen=True)
class OneOf(Rule):
    """One of a few fixed strings (a list or a table is refused, never hashed)."""

    choices: tuple[str, ...]

    @property
    def allowed(self) -> str:  # type: ignore[override]
        """What the rule allows, as the error says it."""
        return f"choose one of {choices_text(self.choices)}"

    def check(self, value: Any) -> Any:
        """The string itself, or a refusal."""
        if not (isinstance(value, str) and value in self.choices):
            self.refuse()
        return value


class _Names(Protocol):
    def __contains__(self, name: object) -> bool: ...

    def __iter__(self) -> Any: ...


@dataclass(frozen=True)
class NameIn(Rule):
    """A name a registry (or a mapping) holds, or one of its aliases; ``registry`` is called when the
    value is checked, so a section can name a registry whose module imports the section's, and names
    added later count."""

    registry: Callable[[], _Names]
    extra: tuple[str, ...] = ()
    error: ClassVar[type[ConfigError]] = UnknownNameError
    """Names allowed beside the registry's (``self`` and ``none`` for a summariser)."""
    about: str = ""
    """What the extra names mean, shown with them."""

    @property
    def allowed(self) -> str:  # type: ignore[override]
        """What the rule allows, as the error says it."""
        names = self.registry()
        listed = names.choices() if callable(getattr(names, "choices", None)) else choices_text(names)  # type: ignore[attr-defined]
        if not self.extra:
            return f"choose one of {listed}"
        extra = choices_text(self.extra) + (f" ({self.about})" if self.about else "")
        return f"choose {extra} or one of {listed}"

    def check(self, value: Any) -> Any:
        """The name itself (an alias stays one), or a refusal."""
        if not (isinstance(value, str) and (value in self.extra or value in self.registry())):
            self.refuse()
        return value


@dataclass(frozen=True)
class Pair(Rule):
    """A ``(min, max)`` pair of integers with ``lo <= min <= max <= hi``; a list becomes a tuple."""

    lo: int
    hi: int

    @property
    def allowed(self) -> str:  # type: ignore[override]
        """What the rule allows, as the error says it."""
        return f"give a (min, max) pair of integers in [{self.lo}, {self.hi}]"

    def check(self, value: Any) -> Any:
        """The pair as a tuple, or a refusal naming the element that fails."""
        if not (isinstance(value, (tuple, list)) and len(value) == 2):
            self.refuse()
        for i, lo in ((0, self.lo), (1, value[0] if _is_int(value[0]) else self.lo)):
            if not (_is_int(value[i]) and lo <= value[i] <= self.hi):
                raise _Bad(int_text(lo, self.hi), f"[{i}]", value[i], has_value=True)
        return tuple(value)


@dataclass(frozen=True)
class Either(Rule):
    """The first of ``rules`` that accepts the value; ``text`` says them all at once (or makes the text
    when called, for choices that are registered later)."""

    rules: tuple[Rule, ...]
    text: str | Callable[[], str] = ""

    @property
    def allowed(self) -> str:  # type: ignore[override]
        """What the rule allows, as the error says it."""
        return self.text() if callable(self.text) else self.text

    def check(self, value: Any) -> Any:
        """What the first accepting rule returns, or a refusal."""
        for rule in self.rules:
            try:
                return rule.check(value)
            except _Bad:
                continue
        self.refuse()


@dataclass(frozen=True)
class Maybe(Rule):
    """``None`` or what ``rule`` allows."""

    rule: Rule

    @property
    def allowed(self) -> str:  # type: ignore[override]
        """What the rule allows, as the error says it."""
        return f"{self.rule.allowed}, or leave it unset"

    def check(self, value: Any) -> Any:
        """``None``, or what the inner rule returns."""
        return None if value is None else self.rule.check(value)


@dataclass(frozen=True)
class FilePath(Rule):
    """The path (a string) of an existing file: not a folder, not a missing path."""

    what: str = "file"

    def check(self, value: Any) -> Any:
        """The path itself, or a refusal saying whether it is missing or a folder."""
        if not isinstance(value, str) or not value:
            raise _Bad(f"give the path of a {self.what} as a string")
        path = Path(value)
        if path.is_dir():
            raise _Bad(f"{value!r} is a folder; give the path of a {self.what}")
        if not path.is_file():
            raise _Bad(f"no such {self.what}")
        return value


@dataclass(frozen=True)
class Instance(Rule):
    """An instance of ``cls`` (a section built and checked already)."""

    cls: type

    @property
    def allowed(self) -> str:  # type: ignore[override]
        """What the rule allows, as the error says it."""
        return f"give a {self.cls.__name__}"

    def check(self, value: Any) -> Any:
        """The instance itself, or a refusal."""
        if not isinstance(value, self.cls):
            self.refuse()
        return value


POSITIVE = RealIn(0.0, lo_open=True)
"""A finite number > 0."""
UNIT_OPEN = RealIn(0.0, 1.0, lo_open=True)
"""A number in (0, 1] (a discount, a lambda, a fraction of the window)."""


def seed_rule(lo: int = 0, *, run: bool = False) -> Rule:
    """A seed in ``[lo, SEED_MAX]``, or also the word ``run`` (follow the run's seed)."""
    ints = IntIn(lo, SEED_MAX)
    if not run:
        return ints
    return Either((ints, OneOf(("run",))), f"choose an integer >= {lo} or 'run' (integers at most {_big(SEED_MAX)})")


def check_value(key: str, value: Any, rule: Rule | None) -> Any:
    """``value`` as ``rule`` allows it, else a :class:`ConfigError` for ``key`` (an option, a spec entry)."""
    if rule is None:
        return value
    try:
        return rule.check(value)
    except _Bad as bad:
        raise bad.kind.invalid(key + bad.suffix, bad.value if bad.has_value else value, bad.allowed) from None


# ----------------------------------------------------------------------------------------- sections
_T = TypeVar("_T")
_PYDANTIC = ConfigDict(
    extra="forbid", arbitrary_types_allowed=True, revalidate_instances="never", use_attribute_docstrings=True
)


class Section:
    """Base of every configuration section: the key prefix, cross-field checks, ``replace``, plain form."""

    SECTION: ClassVar[str] = ""
    """Key-path prefix of the section's fields (``harness``); errors name ``<SECTION>.<field>``."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Rules that involve several fields; runs once every field passed its own rule."""

    def invalid(self, name: str, allowed: str, *, suffix: str = "") -> ConfigError:
        """The error for field ``name`` (its current value) under this section's prefix."""
        value = getattr(self, name)
        if suffix:
            value = value[int(suffix.strip("[]"))]
        return ConfigError.invalid(self.key(name) + suffix, value, allowed)

    @classmethod
    def key(cls, name: str) -> str:
        """The key path of field ``name``: ``harness.window``."""
        return f"{cls.SECTION}.{name}" if cls.SECTION else name

    @classmethod
    def rule(cls, name: str) -> Rule | None:
        """The rule in field ``name``'s annotation."""
        info = cls.__pydantic_fields__[name]  # type: ignore[attr-defined]
        return next((m for m in info.metadata if isinstance(m, Rule)), None)

    @classmethod
    def check_fields(cls, data: Mapping[str, Any]) -> None:
        """Check settings one by one before they are combined (unknown keys, each field's rule).

        For the settings a user gives: a value of the wrong kind is refused by its own key before any
        preset or recipe arithmetic reads it.
        """
        names = cls.field_names()
        for name, value in data.items():
            if name not in names:
                raise ConfigError.unknown(cls.key(name), names)
            rule = cls.rule(name)
            if rule is not None:
                check_value(cls.key(name), value, rule)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        """The section's field names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))  # type: ignore[arg-type]

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied and validated; an unknown key names the valid ones."""
        names = self.field_names()
        for key in changes:
            if key not in names:
                raise ConfigError.unknown(f"{self.SECTION}.{key}", names)
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def as_dict(self) -> dict[str, Any]:
        """Every field by name (values as they are)."""
        return {name: getattr(self, name) for name in self.field_names()}


def _first_error(cls: type, exc: ValidationError) -> ConfigError:
    """The first of pydantic's errors as one :class:`ConfigError` naming the full key path."""
    prefix = getattr(cls, "SECTION", "")
    err = exc.errors(include_url=False)[0]
    ctx = err.get("ctx") or {}
    original = ctx.get("error")
    if isinstance(original, ConfigError):
        return original.under(prefix)
    loc = err.get("loc") or ()
    field = str(loc[0]) if loc else ""
    key = f"{prefix}.{field}" if prefix else field
    kind = err.get("type", "")
    if kind == "unexpected_keyword_argument":
        return ConfigError.unknown(key, [f.name for f in dataclasses.fields(cls)])
    if kind in ("missing_argument", "missing"):
        return ConfigError(f"`{key}` is required; give it a value", key=key, allowed="give it a value")
    if kind == "simlab":
        value = ctx["value"] if ctx.get("has_value") else err.get("input")
        kind_of: type[ConfigError] = ctx.get("kind", ConfigError)
        return kind_of.invalid(key + str(ctx.get("suffix", "")), value, str(ctx["allowed"]))
    if isinstance(original, Exception):
        return ConfigError.invalid(key, err.get("input"), str(original))
    return ConfigError.invalid(key, err.get("input"), str(err.get("msg", "")))


@dataclass_transform(frozen_default=True, field_specifiers=(dataclasses.field, pydantic.Field))
def section(cls: type[_T]) -> type[_T]:
    """Make ``cls`` (a :class:`Section` subclass) a frozen dataclass that pydantic validates when built.

    Any failure comes out as one :class:`~simlab.errors.ConfigError` naming ``<SECTION>.<field>``;
    ``dataclasses.fields``, ``dataclasses.replace``, equality, hashing and pickling behave as for any
    frozen dataclass.
    """
    made = pydantic.dataclasses.dataclass(frozen=True, config=_PYDANTIC)(cls)
    init = made.__init__

    @functools.wraps(init)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:
            init(self, *args, **kwargs)
        except ValidationError as exc:
            raise _first_error(made, exc) from None

    made.__init__ = __init__  # type: ignore[method-assign]
    return made  # type: ignore[return-value]  # pydantic's dataclass is still the class it was given


def plain(obj: Any) -> Any:
    """A section (or a value inside one) as JSON-ready data: tuples as lists, sections as dicts."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple):
        return list(obj)
    return obj


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

    ``nan`` and ``inf`` parse as floats, so the field's rule refuses them by name.
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
    "BATCH_MAX", "COUNT_MAX", "POSITIVE", "SEED_MAX", "STEPS_MAX", "TOKENS_MAX", "UNIT_OPEN",
    "Either", "FilePath", "Flag", "Instance", "IntIn", "Maybe", "NameIn", "OneOf", "Pair", "RealIn", "Rule", "Section",
    "check_value", "choices_text", "flatten", "int_text", "loggable", "parse_overrides", "parse_value", "plain",
    "read_toml", "real_text", "section", "seed_rule", "set_path",
]
