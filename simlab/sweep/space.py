"""A sweep's search space: the ranges a sampler draws from, the swept axes, and the cells (a point and a
seed) a sweep runs; how each is asked of an Optuna trial and stored on one.

The spec (:mod:`.spec`) is made of these, and the plans (:mod:`.plan`) run them; neither is imported
here, and no optuna either (a trial is only called).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Self

from pydantic import BaseModel, Field, model_validator

from simlab.names import ATTR_CELL, ATTR_SEED
from simlab.rules import TABLE, Real
from simlab.rules import refuse as _refuse
from simlab.sweep import labels

if TYPE_CHECKING:
    import optuna

Scalar = str | int | float | bool
"""A setting's value (strict: a bool is a bool, a number is finite)."""


class Distribution(BaseModel):
    """A range Optuna samples from (sampler ``tpe``); what each kind takes is checked in :meth:`_kind`."""

    model_config = TABLE
    kind: Literal["float", "int", "categorical"] = Field(alias="type")
    """``float``, ``int`` or ``categorical``."""
    low: Real = 0.0
    """Lower bound (float and int)."""
    high: Real = 0.0
    """Upper bound, inclusive (float and int)."""
    log: bool = False
    """Sample on a log scale (float and int; needs ``low > 0``)."""
    step: Real | None = None
    """Optional discretisation step (float and int; not with ``log``)."""
    choices: list[Scalar] = Field(default_factory=list)
    """The values of a ``categorical``."""

    @model_validator(mode="after")
    def _kind(self) -> Self:
        """The keys each kind takes, and its range's order."""
        given = self.model_fields_set - {"kind"}
        if self.kind == "categorical":
            return self._categorical(given)
        return self._range(given)

    def _range(self, given: set[str]) -> Self:
        if "choices" in given:
            raise _refuse(f"a {self.kind} range takes low, high, log and step", suffix=".choices", value=self.choices)
        is_int = self.kind == "int"
        what = "an integer" if is_int else "a finite number"
        for key in ("low", "high", "step"):
            value = getattr(self, key) if key in given else None
            if (key != "step" and value is None) or (is_int and value is not None and not isinstance(value, int)):
                raise _refuse(f"give {what}", suffix=f".{key}", value=value)
        if self.high <= self.low:
            raise _refuse(f"give {what} greater than low={self.low!r}", suffix=".high", value=self.high)
        if self.log and self.low <= 0:
            raise _refuse("a log-scale range needs low > 0", suffix=".low", value=self.low)
        if self.step is not None and (self.step <= 0 or self.log):
            raise _refuse(f"give {what} > 0, and no step with log = true", suffix=".step", value=self.step)
        return self

    def _categorical(self, given: set[str]) -> Self:
        if given - {"choices"}:
            extra = sorted(given - {"choices"})[0]
            raise _refuse("a categorical takes only choices", suffix=f".{extra}", value=getattr(self, extra))
        if not self.choices:
            raise _refuse("give a non-empty list of numbers, strings or booleans", suffix=".choices",
                          value=self.choices)
        if len(set(map(repr, self.choices))) != len(self.choices):
            raise _refuse("list each choice once", suffix=".choices", value=self.choices)
        return self

    def suggest(self, trial: optuna.Trial, key: str) -> Any:
        """Ask ``trial`` for a value of this range (a queued trial returns its fixed value)."""
        if self.kind == "categorical":
            return trial.suggest_categorical(key, list(self.choices))
        if self.kind == "float":
            step = None if self.step is None else float(self.step)
            return trial.suggest_float(key, float(self.low), float(self.high), log=self.log, step=step)
        return trial.suggest_int(key, int(self.low), int(self.high), log=self.log,
                                 step=1 if self.step is None else int(self.step))


def encode(value: Any) -> Any:
    """A grid value as an Optuna categorical holds it: a list becomes its JSON text."""
    return json.dumps(value) if isinstance(value, list) else value


def decode(value: Any, grid: Sequence[Any] | None) -> Any:
    """The grid value back from :func:`encode` (JSON text is a list only where the grid holds lists)."""
    if isinstance(value, str) and grid is not None and any(isinstance(g, list) for g in grid):
        with contextlib.suppress(json.JSONDecodeError):
            return json.loads(value)
    return value


@dataclass(frozen=True)
class Axis:
    """One swept config key: either a grid of values or a distribution."""

    key: str
    """Config key path (``train.lr``, ``task.preset``): the Optuna parameter's name."""
    grid: tuple[Any, ...] | None = None
    """Every value to try (sampler ``grid``; a categorical for ``tpe``)."""
    dist: Distribution | None = None
    """The range to sample (sampler ``tpe`` only)."""

    def suggest(self, trial: optuna.Trial) -> Any:
        """The trial's value of this key: one of the grid's values, or one of the range's."""
        if self.grid is None:
            assert self.dist is not None
            return self.dist.suggest(trial, self.key)
        return decode(trial.suggest_categorical(self.key, [encode(v) for v in self.grid]), self.grid)


@dataclass(frozen=True)
class Cell:
    """One run to make: a point of the space and a seed."""

    params: dict[str, Any]
    """Optuna parameters: swept key paths, ``variant`` when there are variants."""
    seed: int
    """The trial's seed."""

    @property
    def key(self) -> str:
        """Canonical identity of the cell (stored on the trial; equal cells have equal keys)."""
        return json.dumps({"params": self.params, "seed": self.seed}, sort_keys=True)

    @property
    def variant(self) -> str:
        """The label without the seed, by key path: what ``simlab report`` pools seeds over (``base`` for an
        empty space; :mod:`.labels`)."""
        return labels.label(self.params)

    @property
    def label(self) -> str:
        """Short human label for run names and tables."""
        prefix = "" if not self.params else self.variant + ","
        return f"{prefix}seed={self.seed}"

    @property
    def optuna_params(self) -> dict[str, Any]:
        """The point as Optuna parameters, list values JSON-encoded (categoricals hold scalars only). The
        seed is no parameter: it goes in the trial's user attributes (:attr:`attrs`), so that Optuna's
        parameter importance ranks the searched axes only."""
        return {k: encode(v) for k, v in self.params.items()}

    @property
    def attrs(self) -> dict[str, Any]:
        """The user attributes of the cell's trial: its identity and its seed."""
        return {ATTR_CELL: self.key, ATTR_SEED: self.seed}
