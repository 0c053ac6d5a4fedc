"""``SIMLAB_SMOKE=1``: every run config and sweep spec at smoke size, to try a command in seconds.

One size knob, read here only. Under it a run trains and evaluates a few steps and episodes, and a sweep
runs its first seed only (every grid cell, every variant), so that a command shown in the docs runs as
written and finishes in seconds; the numbers it prints mean nothing. The docs tests run every page's
commands this way (``tests/test_docs.py``). The sizes are caps: a smaller value given anywhere stays.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

ENV = "SIMLAB_SMOKE"
"""The environment variable; any value but empty or ``0`` turns smoke size on."""
CAPS: dict[str, dict[str, int]] = {
    "base": {"steps": 2, "episodes": 8},
    "train": {"steps": 1, "prompts": 2},
    "eval": {"episodes": 8, "every": 1},
}
"""section -> setting -> the most it may be at smoke size."""
SEEDS = 1
"""Seeds a sweep keeps at smoke size (its first ones; ``SweepSpec.at_smoke_size``)."""
TRIALS = 2
"""Trials a sampled (tpe) sweep runs at most at smoke size."""


def on() -> bool:
    """Whether smoke size is on (``$SIMLAB_SMOKE``)."""
    return os.environ.get(ENV, "") not in ("", "0")


def caps(value_of: Callable[[str], Any]) -> dict[str, int]:
    """The smoke layer of a run's settings (:mod:`simlab.settings`): each capped key path at the smaller of
    its value (``value_of(key)``: what the layers below set, or the default) and its cap; empty when smoke
    size is off."""
    if not on():
        return {}
    return {f"{name}.{key}": min(value_of(f"{name}.{key}"), cap) for name, section in CAPS.items()
            for key, cap in section.items()}
