"""``SIMLAB_SMOKE=1``: every run config and sweep spec at smoke size, to try a command in seconds.

One size knob, read here only. Under it a run trains and evaluates a few steps and episodes, and a sweep
runs its first seed only (every grid cell, every variant), so that a command shown in the docs runs as
written and finishes in seconds; the numbers it prints mean nothing. The docs tests run every page's
commands this way (``tests/test_docs.py``). The sizes are caps: a smaller value given anywhere stays.
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

if TYPE_CHECKING:
    from simlab.sweep.spec import SweepSpec


class _Config(Protocol):
    """A resolved run config as this module sees it (not imported: :mod:`simlab.config` imports this one)."""

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied."""


Config = TypeVar("Config", bound=_Config)

ENV = "SIMLAB_SMOKE"
"""The environment variable; any value but empty or ``0`` turns smoke size on."""
CAPS: dict[str, dict[str, int]] = {
    "base": {"steps": 2, "episodes": 8},
    "train": {"steps": 1, "prompts": 2},
    "eval": {"episodes": 8, "every": 1},
}
"""section -> setting -> the most it may be at smoke size."""
SEEDS = 1
"""Seeds a sweep keeps at smoke size (its first ones)."""
TRIALS = 2
"""Trials a sampled (tpe) sweep runs at most at smoke size."""


def on() -> bool:
    """Whether smoke size is on (``$SIMLAB_SMOKE``)."""
    return os.environ.get(ENV, "") not in ("", "0")


def shrink(cfg: Config) -> Config:
    """A resolved run config at smoke size when smoke size is on (each capped setting at most its cap)."""
    if not on():
        return cfg
    changes = {}
    for name, caps in CAPS.items():
        section = getattr(cfg, name)
        changes[name] = section.replace(**{k: min(getattr(section, k), cap) for k, cap in caps.items()})
    return cfg.replace(**changes)


def shrink_spec(spec: SweepSpec) -> SweepSpec:
    """A sweep spec at smoke size when smoke size is on: its first :data:`SEEDS` seed(s) and at most
    :data:`TRIALS` sampled trials (a grid keeps every cell)."""
    if not on():
        return spec
    return dataclasses.replace(spec, seeds=tuple(spec.seeds[:SEEDS]), plan=spec.plan.at_most(TRIALS))
