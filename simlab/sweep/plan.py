"""A sweep's plan, one type per sampler: which trials it runs, how it is checked and probed, and how a
worker gets its next trial. Nothing else in simlab asks which sampler a spec names.

- :class:`GridPlan`: every cell x seed, each queued as a WAITING trial with fixed parameters
  (:meth:`GridPlan.enqueue`) and claimed from the study's queue; the sampler never chooses a value.
- :class:`TpePlan`: ``n_trials`` samples of Optuna's TPE, asked for one at a time while ``n_trials``
  allows (under the study's lock: it bounds every process together); the seeds are taken in turn over
  the trial numbers.

Parsing a spec needs no optuna, so this module imports it inside the methods that run trials. A plan reads
the spec it runs through :class:`Space` (the spec imports this module's types, not the other way round).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from simlab.errors import SpecError
from simlab.names import ATTR_CELL, ATTR_FAILURE
from simlab.rules import COUNT_MAX
from simlab.sweep.labels import VARIANT_KEY
from simlab.sweep.space import Axis, Cell

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial

    from simlab.sweep.queue import TrialQueue

PROBE_LIMIT = 256
"""Most configurations a tpe spec's probes resolve (every combination while there are this few)."""


class Space(Protocol):
    """What a plan reads of the spec it runs (:class:`~simlab.sweep.spec.SweepSpec`)."""

    @property
    def name(self) -> str:
        """The study's name (its lock is keyed by it)."""

    @property
    def seeds(self) -> tuple[int, ...]:
        """The sweep's seeds."""

    @property
    def axes(self) -> tuple[Axis, ...]:
        """The swept keys."""

    @property
    def variants(self) -> Sequence[Any]:
        """The named bundles (each has a ``name``)."""

    def grid_points(self) -> list[dict[str, Any]]:
        """Every point of a grid space."""

    def cells(self) -> list[Cell]:
        """Grid points x seeds."""


def accounts_for_its_cell(trial: FrozenTrial, final: Sequence[str]) -> bool:
    """Does this trial account for its cell (so the cell must not be enqueued again)? Waiting, running or
    finished, or failed with a kind in ``final`` (a result, not a reason to run it again)."""
    from optuna.trial import TrialState

    return trial.state != TrialState.FAIL or trial.user_attrs.get(ATTR_FAILURE) in final


@dataclass(frozen=True)
class GridPlan:
    """Sampler ``grid``: every cell x seed, enqueued explicitly and claimed from the queue."""

    name: ClassVar[str] = "grid"
    n_trials: ClassVar[None] = None
    """The cell count decides: a grid names no trial count."""

    @classmethod
    def parse(cls, n_trials: int | None) -> GridPlan:
        """The plan of a spec with ``sampler = 'grid'``; it takes no ``n_trials``."""
        if n_trials is not None:
            raise SpecError.invalid("n_trials", n_trials, "sampler 'grid' runs every cell x seed; remove n_trials")
        return cls()

    def check_axis(self, shown: str, value: Any) -> None:
        """A distribution (a ``{type = ...}`` table) is refused: a grid lists its values."""
        raise SpecError.invalid(
            shown, value, "sampler 'grid' needs a list of values; use sampler = 'tpe' for distributions"
        )

    def check_baseline(self, baseline: Any) -> None:
        """A grid's baseline is one of its variants (checked against the cells by the parser)."""

    def at_most(self, trials: int) -> GridPlan:
        """The plan at smoke size: a grid keeps every cell."""
        return self

    def total(self, spec: Space) -> int:
        """Trials of the whole sweep: the cells."""
        return len(spec.cells())

    def probes(self, spec: Space) -> list[dict[str, Any]]:
        """The points the runner resolves before anything is written: every grid point."""
        return spec.grid_points()

    def sampler(self, seed: int | None = None) -> optuna.samplers.BaseSampler:
        """A random sampler: grid trials all come from the queue with fixed params, so it never chooses."""
        import optuna

        return optuna.samplers.RandomSampler(seed=seed)

    def enqueue(self, study: optuna.Study, spec: Space, final: Sequence[str]) -> int:
        """Queue every cell no trial accounts for (under the study's lock); how many were queued."""
        from simlab.sweep import lifecycle

        trials = study.get_trials(deepcopy=False)
        have = {t.user_attrs.get(ATTR_CELL) for t in trials if accounts_for_its_cell(t, final)}
        missing = [cell for cell in spec.cells() if cell.key not in have]
        for cell in missing:
            lifecycle.queue(study, cell.optuna_params, cell.attrs)
        return len(missing)

    def todo(self, study: optuna.Study, spec: Space, final: Sequence[str]) -> int:
        """Trials still to run: the waiting cells."""
        from optuna.trial import TrialState

        return len(study.get_trials(deepcopy=False, states=(TrialState.WAITING,)))

    def claim(self, study: optuna.Study, queue: TrialQueue, spec: Space,
              final: Sequence[str]) -> optuna.Trial | None:
        """The next waiting cell, claimed as the study's storage allows; ``None`` when none is left."""
        return queue.claim(study)

    def cell(self, trial: optuna.Trial, spec: Space, params: dict[str, Any]) -> Cell:
        """The claimed trial's cell: its point and the seed its queued attributes hold."""
        return Cell(params, int(json.loads(trial.user_attrs[ATTR_CELL])["seed"]))


@dataclass(frozen=True)
class TpePlan:
    """Sampler ``tpe``: ``n_trials`` trials asked of Optuna's TPE sampler."""

    n_trials: int
    """Trials of the whole sweep, over every process."""
    name: ClassVar[str] = "tpe"

    @classmethod
    def parse(cls, n_trials: int | None) -> TpePlan:
        """The plan of a spec with ``sampler = 'tpe'``; it needs ``n_trials``."""
        if n_trials is None:
            raise SpecError.invalid("n_trials", None, f"sampler 'tpe' needs an integer in [1, {COUNT_MAX}]")
        return cls(n_trials)

    def check_axis(self, shown: str, value: Any) -> None:
        """A distribution is what TPE samples."""

    def check_baseline(self, baseline: Any) -> None:
        """A tpe sweep has no fixed cells to difference against."""
        raise SpecError.invalid(
            "baseline", baseline, "a baseline needs `sampler = 'grid'` (a tpe sweep has no fixed cells)"
        )

    def at_most(self, trials: int) -> TpePlan:
        """The plan at smoke size: at most ``trials`` sampled trials."""
        return TpePlan(min(self.n_trials, trials))

    def total(self, spec: Space) -> int:
        """Trials of the whole sweep: ``n_trials``."""
        return self.n_trials

    def probes(self, spec: Space) -> list[dict[str, Any]]:
        """The points the runner resolves before anything is written: the combinations of the ranges'
        probe values (:func:`_combinations`) under each variant."""
        keys = [axis.key for axis in spec.axes]
        combos = _combinations([_probe_values(axis) for axis in spec.axes])
        variants = [{VARIANT_KEY: v.name} for v in spec.variants] or [{}]
        return [{**dict(zip(keys, combo, strict=True)), **variant} for variant in variants for combo in combos]

    def sampler(self, seed: int | None = None) -> optuna.samplers.BaseSampler:
        """Optuna's TPE sampler; :meth:`claim` gives each trial its own, seeded by the trial's number."""
        import optuna

        return optuna.samplers.TPESampler(seed=seed)

    def enqueue(self, study: optuna.Study, spec: Space, final: Sequence[str]) -> int:
        """Nothing to queue: each trial is a new sample."""
        return 0

    def todo(self, study: optuna.Study, spec: Space, final: Sequence[str]) -> int:
        """Trials still to run: ``n_trials`` minus those already done or under way."""
        busy = sum(accounts_for_its_cell(t, final) for t in study.get_trials(deepcopy=False))
        return max(0, self.n_trials - busy)

    def claim(self, study: optuna.Study, queue: TrialQueue, spec: Space,
              final: Sequence[str]) -> optuna.Trial | None:
        """A new sample while ``n_trials`` allows (counted under the study's lock), else ``None``."""
        with queue.lock(spec.name):
            if self.todo(study, spec, final) < 1:
                return None
            trial = queue.ask(study)
        study.sampler = self.sampler(seed=trial_seed(spec.name, trial.number))  # the trial's values are drawn later
        return trial

    def cell(self, trial: optuna.Trial, spec: Space, params: dict[str, Any]) -> Cell:
        """The sampled trial's cell (the seeds in turn over the trial numbers), recorded on the trial."""
        from simlab.sweep import lifecycle

        cell = Cell(params, spec.seeds[trial.number % len(spec.seeds)])
        lifecycle.record(trial, cell.attrs)
        return cell


def trial_seed(study: str, number: int) -> int:
    """The seed of TPE trial ``number``'s draws: the same sweep played again draws the same values.

    One seed per trial, not one per process: every trial opens its own sampler in a worker pool, and one
    seed for all would give every start-up trial the same random values. With one worker a TPE sweep
    replays exactly; with several, each trial's draws still depend on which trials had finished first.
    """
    digest = hashlib.sha256(f"{study}:{number}".encode()).digest()
    return int.from_bytes(digest[:4], "big")


Plan = GridPlan | TpePlan
PLANS: dict[str, type[GridPlan] | type[TpePlan]] = {"grid": GridPlan, "tpe": TpePlan}
"""Sampler name -> its plan (``sampler`` in a spec)."""


def _probe_values(axis: Axis) -> tuple[Any, ...]:
    """What to try of one axis: a grid's values, a categorical's choices, an int range's values when it
    has at most 8 (rules such as divisibility bite in between), else a range's two ends."""
    if axis.grid is not None:
        return axis.grid
    d = axis.dist
    assert d is not None
    if d.kind == "categorical":
        return tuple(d.choices)
    step = d.step if d.step is not None else (1 if d.kind == "int" else None)
    if step is None:
        return (d.low, d.high)
    last = d.low + step * math.floor((d.high - d.low) / step + 1e-9)  # the highest value Optuna can sample
    if d.kind == "int" and (last - d.low) // step < 8:
        return tuple(range(int(d.low), int(last) + 1, int(step)))
    return (d.low, int(last) if d.kind == "int" else last)


def _combinations(values: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Every combination of the axes' probe values while there are at most :data:`PROBE_LIMIT`, else
    every combination of their ends, else every pair of axes at every pair of ends (the rest at their
    low end): values valid one by one can still be invalid together (a window and a T_comp)."""
    if math.prod(len(v) for v in values) <= PROBE_LIMIT:
        return list(itertools.product(*values))
    ends = [(v[0], v[-1]) if len(v) > 1 else v for v in values]
    if math.prod(len(v) for v in ends) <= PROBE_LIMIT:
        return list(itertools.product(*ends))
    low = [v[0] for v in ends]
    out = []
    for i, j in itertools.combinations(range(len(ends)), 2):
        for a, b in itertools.product(ends[i], ends[j]):
            combo = list(low)
            combo[i], combo[j] = a, b
            out.append(tuple(combo))
    return out
