"""What a configuration field allows, on pydantic's own constraints, and simlab's own validators.

A field says what it allows in its annotation, with pydantic's constraints::

    window: Annotated[int, Field(ge=8, le=TOKENS_MAX)] = 128
    frac: Annotated[Real, Field(gt=0, le=1)] = 0.8
    summary_loss: Literal["train", "mask"] = "train"

Every check is strict (:data:`STRICT`): nothing is converted behind the user's back (no ``"8"`` -> 8,
no ``True`` -> 1, no ``nan``); :data:`Real` keeps an integer given for a float an integer, so a resolved
config logs and hashes exactly as written. Three rules are simlab's own, as annotated validators: a name
a registry holds (:class:`Names`, so a value that validates always runs), a ``(min, max)`` pair in order
(:class:`MinMax`) and an existing file (:class:`ExistingFile`); each writes what it allows into the
field's JSON schema, from which :mod:`simlab.refusals` says a refusal.
:func:`check_value` checks one value (an option, a spec entry, a function argument) against an
annotation. This module imports nothing from simlab but its errors and :mod:`simlab.refusals`.
"""

from __future__ import annotations

import functools
import numbers
import sys
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import AfterValidator, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import PydanticCustomError, core_schema

from simlab.errors import ConfigError
from simlab.refusals import CUSTOM, NAMES, SAYS, choices_text, refusal

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
def refuse(allowed: str, **ctx: Any) -> PydanticCustomError:
    """A simlab validator's refusal: ``allowed`` is what :func:`refusal` quotes (``suffix``/``value``
    name the part of the value that failed)."""
    return PydanticCustomError(CUSTOM, "{allowed}", {"allowed": allowed, **ctx})


def _float_holds(value: int | float) -> int | float:
    if isinstance(value, int) and abs(value) > sys.float_info.max:
        raise refuse(f"choose a number a float holds (magnitude at most {sys.float_info.max:.4g})")
    return value


Real = Annotated[int | float, AfterValidator(_float_holds)]
"""A finite real number; an integer stays an integer (strict: a bool is neither), if a float can hold it."""
# ------------------------------------------------------------------------- simlab's own validators
class _AfterCheck:
    """An annotated validator: pydantic's own check of the type first, then :meth:`check`."""

    def check(self, value: Any) -> Any:  # pragma: no cover - every validator overrides it
        """The value, or raise :func:`refuse`."""
        raise NotImplementedError

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.no_info_after_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: Any) -> JsonSchemaValue:
        """pydantic's schema of the type, with what this check allows where it says it (:data:`SAYS`)."""
        js = dict(handler(schema))
        said = getattr(self, "allowed", None)
        return {**js, SAYS: said, NAMES: isinstance(self, Names)} if said is not None else js


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

    def __get_pydantic_json_schema__(self, schema: core_schema.CoreSchema, handler: Any) -> JsonSchemaValue:
        return {**handler(schema), SAYS: self.allowed}


# ------------------------------------------------------------------------------ describing a field
def _parts(tp: Any) -> tuple[Any, list[Any]]:
    """``tp`` without ``Annotated``, and its metadata (a ``Field``'s constraints unpacked); typing
    flattens an ``Annotated`` inside another, so one level holds all of it."""
    tp, *meta = get_args(tp) if get_origin(tp) is Annotated else (tp,)
    flat = [m for item in meta for m in (item.metadata if isinstance(item, FieldInfo) else [item])]
    return tp, flat


def is_real(tp: Any) -> bool:
    """Whether an annotation is :data:`Real` (``int | float``), with or without its constraints (for a
    command-line option's type hint)."""
    tp, _ = _parts(tp)
    return get_origin(tp) in (Union, types.UnionType) and set(get_args(tp)) == {int, float}


@functools.cache
def fields_of(tp: Any) -> dict[str, Any]:
    """A pydantic model's or dataclass's field annotations (constraints included) by the name a file
    uses (an alias where one is set); ``{}`` for any other type."""
    infos = getattr(tp, "__pydantic_fields__", None) or {}
    return {info.alias or name: Annotated[(info.annotation, *info.metadata)] if info.metadata else info.annotation
            for name, info in infos.items()}


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
    "Names", "NonNegative", "Positive", "Real", "Says", "Seed", "Unit", "UnitOpen", "check_value", "fields_of", "ints",
    "is_real", "plain", "refuse",
]
