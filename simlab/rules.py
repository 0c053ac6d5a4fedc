"""What a configuration field allows, on pydantic's own constraints, and the one line a refusal becomes.

A field says what it allows in its annotation, with pydantic's constraints::

    window: Annotated[int, Field(ge=8, le=TOKENS_MAX)] = 128
    frac: Annotated[Real, Field(gt=0, le=1)] = 0.8
    summary_loss: Literal["train", "mask"] = "train"

Every check is strict (:data:`STRICT`): nothing is converted behind the user's back (no ``"8"`` -> 8,
no ``True`` -> 1, no ``nan``); :data:`Real` keeps an integer given for a float an integer, so a resolved
config logs and hashes exactly as written. Three rules are simlab's own, as annotated validators: a name
a registry holds (:class:`Names`, so a value that validates always runs), a ``(min, max)`` pair in order
(:class:`MinMax`) and an existing file (:class:`ExistingFile`).

:func:`refusal` renders pydantic's first error as one :class:`~simlab.errors.ConfigError`: the key path,
the bad value, and what is allowed, read from the annotation itself (:func:`allowed`).
:func:`check_value` checks one value (an option, a spec entry, a function argument) against an
annotation. This module imports nothing from simlab but its errors.
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, cast, get_args, get_origin

from pydantic import AfterValidator, ConfigDict, Field, InstanceOf, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticCustomError, core_schema

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

STRICT = ConfigDict(strict=True, allow_inf_nan=False)
"""How every field and value is checked: strict types, finite numbers."""
TABLE = ConfigDict(**STRICT, extra="forbid", frozen=True)
"""How a table of an input file (a sweep spec's, a findings row) is read: strictly, with no unknown key
(a field with an alias is read by its alias only: ``type``, not ``kind``)."""
_CUSTOM = "simlab"
"""pydantic error type of simlab's own validators; its context holds the text :func:`refusal` quotes."""


def refuse(allowed: str, **ctx: Any) -> PydanticCustomError:
    """A simlab validator's refusal: ``allowed`` is what :func:`refusal` quotes (``suffix``/``value``
    name the part of the value that failed)."""
    return PydanticCustomError(_CUSTOM, "{allowed}", {"allowed": allowed, **ctx})


def _float_holds(value: int | float) -> int | float:
    if isinstance(value, int) and abs(value) > sys.float_info.max:
        raise refuse(f"choose a number a float holds (magnitude at most {sys.float_info.max:.4g})")
    return value


Real = Annotated[int | float, AfterValidator(_float_holds)]
"""A finite real number; an integer stays an integer (strict: a bool is neither), if a float can hold it."""
# ------------------------------------------------------------------------------ texts
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


# ------------------------------------------------------------------------- simlab's own validators
class _AfterCheck:
    """An annotated validator: pydantic's own check of the type first, then :meth:`check`."""

    def check(self, value: Any) -> Any:  # pragma: no cover - every validator overrides it
        """The value, or raise :func:`refuse`."""
        raise NotImplementedError

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))


@dataclass(frozen=True)
class Names(_AfterCheck):
    """A string that a registry (or a tuple of names) holds, or one of its aliases.

    ``registry`` is called when a value is checked, so a section can name the registry that executes
    the setting even where that registry's module imports the section's, and names registered later
    count. ``extra`` are names allowed beside the registry's (``self``, ``none`` for a summariser),
    ``about`` says what they mean.
    """

    registry: Callable[[], Iterable[str]]
    extra: tuple[str, ...] = ()
    about: str = ""

    @property
    def allowed(self) -> str:
        """What the field allows, as the error says it."""
        names = self.registry()
        listed = names.choices() if callable(getattr(names, "choices", None)) else choices_text(names)  # type: ignore[attr-defined]
        if not self.extra:
            return f"choose one of {listed}"
        extra = choices_text(self.extra) + (f" ({self.about})" if self.about else "")
        return f"choose {extra} or one of {listed}"

    def check(self, value: str) -> str:
        """The name itself (an alias stays one), or a refusal listing the names."""
        if value in self.extra or value in self.registry():
            return value
        raise refuse(self.allowed)


@dataclass(frozen=True)
class MinMax(_AfterCheck):
    """A ``(min, max)`` pair with min <= max, given as a list or a tuple (TOML has no tuples); each
    element's own bounds are the tuple's item types."""

    @staticmethod
    def check(pair: tuple[int, int]) -> tuple[int, int]:
        """The pair, or a refusal naming its max."""
        if pair[1] < pair[0]:
            raise refuse(f"choose an integer >= {pair[0]}, the pair's min", suffix="[1]", value=pair[1])
        return pair

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        schema = handler(source)
        schema["strict"] = False  # a list is read as the tuple; the items stay strict
        return core_schema.no_info_after_validator_function(self.check, schema)


@dataclass(frozen=True)
class ExistingFile(_AfterCheck):
    """The path (a string) of an existing file: not a folder, not a missing path."""

    what: str = "file"

    @property
    def allowed(self) -> str:
        """What the field allows, as the error says it."""
        return f"give the path of a {self.what} as a string"

    def check(self, value: str) -> str:
        """The path itself, or a refusal saying whether it is missing or a folder."""
        path = Path(value)
        if not value:
            raise refuse(self.allowed)
        if path.is_dir():
            raise refuse(f"{value!r} is a folder; give the path of a {self.what}")
        if not path.is_file():
            raise refuse(f"no such {self.what}")
        return value


@dataclass(frozen=True)
class Says:
    """What an error says a field allows, where its constraints alone would read poorly (a pattern)."""

    allowed: str


# ------------------------------------------------------------------------------ describing a field
def _parts(tp: Any) -> tuple[Any, list[Any]]:
    """``tp`` without ``Annotated``, and its metadata (a ``Field``'s constraints unpacked); typing
    flattens an ``Annotated`` inside another, so one level holds all of it."""
    tp, *meta = get_args(tp) if get_origin(tp) is Annotated else (tp,)
    flat = [m for item in meta for m in (item.metadata if isinstance(item, FieldInfo) else [item])]
    return tp, flat


_SIDES = {"ge": (0, False), "gt": (0, True), "le": (1, False), "lt": (1, True)}
"""The bound attributes of annotated_types' Ge, Gt, Le and Lt, which pydantic makes of ``Field(ge=...)`` and
so on: which side each bounds (0 low, 1 high) and whether it is open."""


def _bounds(meta: list[Any]) -> tuple[float, float, bool, bool]:
    """(lo, hi, lo_open, hi_open) of the constraints in ``meta``; a side without one is infinite."""
    sides = [(-math.inf, False), (math.inf, False)]
    for m in meta:
        for name, (side, is_open) in _SIDES.items():
            if getattr(m, name, None) is not None:
                sides[side] = (float(getattr(m, name)), is_open)
    (lo, lo_open), (hi, hi_open) = sides
    return lo, hi, lo_open, hi_open


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def allowed(tp: Any) -> str:
    """What an annotation allows, as an error says it: ``choose an integer in [8, 65536]``."""
    tp, meta = _parts(tp)
    said = next((m.allowed for m in meta if isinstance(m, (Names, ExistingFile, Says))), None)
    if said is not None:
        return said
    if any(isinstance(m, cast(type, InstanceOf)) for m in meta):  # InstanceOf[X] carries an InstanceOf()
        return f"give a {tp.__name__}"
    if _is_union(tp):
        return _allowed_union(tp, meta)
    if tp is bool:
        return "choose true or false"
    if tp is int:
        lo, hi = _bounds(meta)[:2]
        return int_text(int(lo), int(hi)) if math.isfinite(lo) and math.isfinite(hi) else "choose an integer"
    if get_origin(tp) is Literal:
        choices = get_args(tp)
        return f"choose {choices_text(choices)}" if len(choices) == 1 else f"choose one of {choices_text(choices)}"
    return _allowed_container(tp, meta)


def is_real(tp: Any) -> bool:
    """Whether an annotation is :data:`Real` (``int | float``), with or without its constraints."""
    tp, _ = _parts(tp)
    return _is_union(tp) and set(get_args(tp)) == {int, float}


def _allowed_union(tp: Any, meta: list[Any]) -> str:
    """What a union allows: an optional value, a real number (``int | float``), or one of its members."""
    args = get_args(tp)
    rest = tuple(a for a in args if a is not type(None))
    if len(rest) < len(args):
        inner = rest[0] if len(rest) == 1 else Union[rest]  # noqa: UP007 - a Union built from a tuple
        return f"{allowed(Annotated[(inner, *meta)] if meta else inner)}, or leave it unset"
    if is_real(tp):
        return real_text(*_bounds(meta))
    texts = [allowed(a) for a in rest]
    verb = texts[0].split(" ", 1)[0]
    return f"{verb} " + " or ".join(t.removeprefix("choose ").removeprefix("give ") for t in texts)


def _allowed_container(tp: Any, meta: list[Any]) -> str:
    """What a string, a pair, a list, a table or a record of fields allows."""
    origin, args = get_origin(tp), get_args(tp)
    if origin is tuple and args[-1] is not Ellipsis:
        return f"give a (min, max) pair of integers in {allowed(args[0]).removeprefix('choose an integer in ')}"
    if origin in (list, tuple):
        least = next((m.min_length for m in meta if getattr(m, "min_length", None)), 0)
        item = allowed(args[0]).removeprefix("give ").removeprefix("choose ")
        return f"give a {'non-empty ' if least else ''}list, each item: {item}"
    if origin is dict:
        return "give a table of key = value"
    if tp is str:
        return "give a string"
    if fields_of(tp):
        return f"give a table with keys {choices_text(fields_of(tp))}"
    return f"give a {getattr(tp, '__name__', 'value')}"


@functools.cache
def fields_of(tp: Any) -> dict[str, Any]:
    """A pydantic model's or dataclass's field annotations (constraints included) by the name a file
    uses (an alias where one is set); ``{}`` for any other type."""
    infos = getattr(tp, "__pydantic_fields__", None) or {}
    return {info.alias or name: Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
            for name, info in infos.items()}


def _walk(tp: Any, loc: tuple[Any, ...]) -> tuple[list[str | int], Any]:
    """The places ``loc`` names in a value annotated ``tp`` (fields, table keys, items) and the annotation
    at the last of them; the walk stops at a union's members (the union is what the value failed) and at
    a key that is not a field."""
    path: list[str | int] = []
    for part in loc:
        base, _ = _parts(tp)
        members = [a for a in get_args(base) if a is not type(None)] if _is_union(base) else [tp]
        if len(members) > 1:
            break
        base, _ = _parts(members[0])
        args, origin = get_args(base), get_origin(base)
        if isinstance(part, int) and origin in (list, tuple):
            tp = args[part] if origin is tuple and len(args) > part and args[-1] is not Ellipsis else args[0]
        elif isinstance(part, str) and origin is dict:
            tp = args[1]
        elif isinstance(part, str) and part in fields_of(base):
            tp = fields_of(base)[part]
        else:
            break  # a union member's tag: what the value failed is tp as a whole (an optional one included)
        path.append(part)
    return path, tp


def key_path(where: str, path: list[str | int]) -> str:
    """``where`` followed by ``path``: ``variants[0].name``, ``task.horizon[1]``."""
    out = where
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def refusal(where: str, tp: Any, err: ErrorDetails, error: type[ConfigError] = ConfigError) -> ConfigError:
    """One of pydantic's errors for the value at ``where`` (annotated ``tp``) as one ``ConfigError``.

    The key path follows the error's location into fields, table keys and items (``task.horizon[1]``).
    A simlab validator's error quotes its own text; an unknown key lists the known ones; any other says
    what the annotation there allows. A refused name is an ``UnknownNameError`` (unless ``error`` is
    more specific).
    """
    path, at = _walk(tp, tuple(err["loc"]))
    key, ctx, stopped = key_path(where, path), err.get("ctx") or {}, len(path) < len(err["loc"])
    if error is ConfigError and any(isinstance(m, Names) for m in _parts(at)[1]):
        error = UnknownNameError
    if err["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        return error.unknown(key_path(key, [err["loc"][-1]]), list(fields_of(_parts(at)[0])))
    if err["type"] in ("missing", "missing_argument"):
        return error(f"`{key}` is required; give it a value", key=key, allowed="give it a value")
    if err["type"] == _CUSTOM and not (stopped and _is_union(_parts(at)[0])):
        return error.invalid(key + ctx.get("suffix", ""), ctx.get("value", err["input"]), ctx["allowed"])
    return error.invalid(key, err["input"], allowed(at))


@functools.lru_cache(maxsize=512)
def _adapter(tp: Any) -> TypeAdapter[Any]:
    """A validator for ``tp``; a model or a section keeps its own config (pydantic refuses another)."""
    return TypeAdapter(tp) if fields_of(_parts(tp)[0]) else TypeAdapter(tp, config=STRICT)


def plain(value: Any) -> Any:
    """A numpy scalar as the Python number it holds (``np.int64(8)`` -> 8); anything else as it is.

    Strict checks refuse a numpy integer, which code computing sizes with numpy passes in good faith.
    """
    if isinstance(value, (bool, int, float)) or not isinstance(value, numbers.Real):
        return value
    return int(value) if isinstance(value, numbers.Integral) else float(value)


def check_value(key: str, value: Any, tp: Any, error: type[ConfigError] = ConfigError) -> Any:
    """``value`` as annotation ``tp`` allows it, else an ``error`` for ``key`` (:func:`refusal`)."""
    try:
        return _adapter(tp).validate_python(plain(value))
    except ValidationError as exc:
        raise refusal(key, tp, exc.errors(include_url=False)[0], error) from None


@functools.cache
def ints(lo: int, hi: int = COUNT_MAX) -> Any:
    """An integer in ``[lo, hi]`` (for :func:`check_value`; a field writes the ``Annotated`` itself)."""
    return Annotated[int, Field(ge=lo, le=hi)]


Positive = Annotated[Real, Field(gt=0)]
"""A finite number > 0."""
NonNegative = Annotated[Real, Field(ge=0)]
"""A finite number >= 0."""
Unit = Annotated[Real, Field(ge=0, le=1)]
"""A number in [0, 1] (a probability, a fraction)."""
UnitOpen = Annotated[Real, Field(gt=0, le=1)]
"""A number in (0, 1] (a discount, a lambda, a fraction of the window)."""
Seed = Annotated[int, Field(ge=0, le=SEED_MAX)]
"""A seed."""


__all__ = [
    "BATCH_MAX", "COUNT_MAX", "SEED_MAX", "STEPS_MAX", "STRICT", "TABLE", "TOKENS_MAX", "ExistingFile", "MinMax",
    "Names", "NonNegative", "Positive", "Real", "Says", "Seed", "Unit", "UnitOpen", "allowed", "check_value",
    "choices_text", "fields_of", "int_text", "ints", "is_real", "key_path", "plain", "real_text", "refusal", "refuse",
]
