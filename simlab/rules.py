"""What a configuration field allows: the :class:`Rule` family, the shared bounds, and the texts errors quote.

A rule is used as ``Annotated[type, rule]`` on a section's field (:mod:`simlab.schema`) or on its own
through :func:`check_value` (an option, a spec entry, a function argument). It returns the value
unchanged (an integer given for a float stays an integer) or refuses it with what is allowed; the
refusal becomes one :class:`~simlab.errors.ConfigError` naming the key path, the bad value and that
text. This module imports nothing from simlab but its errors.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import Any, ClassVar, NoReturn, Protocol

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


__all__ = [
    "BATCH_MAX", "COUNT_MAX", "POSITIVE", "SEED_MAX", "STEPS_MAX", "TOKENS_MAX", "UNIT_OPEN",
    "Either", "FilePath", "Flag", "Instance", "IntIn", "Maybe", "NameIn", "OneOf", "Pair", "RealIn", "Rule",
    "check_value", "choices_text", "int_text", "real_text", "seed_rule",
]
