"""Blame for a bad harness value: the user's setting it came from, and the nearest value that works.

A run's harness is layered preset < recipe < user (:func:`simlab.config.resolve`). When the result fails
its checks, the error is re-keyed to the user's setting that caused it (a recipe derives supo's frac from
``harness.window``; a preset's window clashes with a long ``harness.summary_tokens``), with the nearest
value of that setting that works.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from simlab.errors import ConfigError
from simlab.harness.config import HarnessConfig
from simlab.recipes import Recipe


def _nearest(value: int, works: Callable[[int], bool], limit: int = 4096) -> str | None:
    """``choose an integer >= n`` (or ``<= n``) for the valid value closest to ``value``, if one is near."""
    for step in range(1, limit + 1):
        for cand, how in ((value + step, ">="), (value - step, "<=")):
            if cand >= 0 and works(cand):
                return f"choose an integer {how} {cand}"
    return None


class _Layers:
    """The harness layers of a run (preset < recipe < user) and which of the user's settings a bad
    recipe-derived value came from."""

    def __init__(self, preset: Any, recipe: Recipe, need: tuple[int, int]) -> None:
        self.preset, self.recipe, self.need = preset, recipe, need

    def derived(self, user: Mapping[str, Any]) -> dict[str, Any]:
        # the recipe sees the window the run will have, so its ratios (L = 0.95 W, T_comp = W/6) scale with it
        return self.recipe.harness({**self.preset.harness, **user})

    def build(self, user: Mapping[str, Any]) -> HarnessConfig:
        cfg = HarnessConfig(**{**self.preset.harness, **self.derived(user), **user})
        cfg.check_fits(*self.need)
        return cfg

    def works(self, user: Mapping[str, Any]) -> bool:
        try:
            HarnessConfig.check_fields(user)
            self.build(user)
        except ConfigError:
            return False
        return True

    def blame(self, exc: ConfigError, user: Mapping[str, Any]) -> ConfigError:
        """``exc`` re-keyed to the user's setting it came from, with the nearest value that works.

        A bad value the recipe derived (supo's frac from ``harness.window``), or a preset value that
        clashes with a user's setting (the preset's window with a long ``harness.summary_tokens``), is
        reported against the user's setting; an error on the user's own setting gets the nearest
        value that works under the recipe too.
        """
        field = (exc.key or "").removeprefix("harness.").split("[")[0]
        reason = _WHY.sub("", exc.allowed).strip()
        if field in user:
            return self._with_fix(exc, field, user, reason)
        derived = self.derived(user)
        for key in user:
            rest = {k: v for k, v in user.items() if k != key}
            moved = field in derived and self.derived(rest).get(field) != derived[field]
            if moved:
                why = f"train.recipe={self.recipe.name!r} derives harness.{field}={derived[field]!r} from it"
            elif self.works(rest):
                why = f"it clashes with harness.{field}={exc.value!r} (not set by you)"
            else:
                continue
            why += f": {reason}" if reason else f", and harness.{field} allows: {exc.allowed.removeprefix('choose ')}"
            return self._with_fix(exc, key, user, why)
        return exc

    def _with_fix(self, exc: ConfigError, key: str, user: Mapping[str, Any], why: str) -> ConfigError:
        value = user[key]
        if isinstance(value, bool) or not isinstance(value, int):
            return exc if key == (exc.key or "").removeprefix("harness.") else ConfigError.invalid(
                f"harness.{key}", value, why)
        fix = _nearest(value, lambda v: self.works({**user, key: v}))
        text = "; ".join(part for part in (why, fix) if part)
        return ConfigError.invalid(f"harness.{key}", value, text or exc.allowed)


_WHY = re.compile(r"[;,]?\s*(choose|raise it|lower it)\b[^;]*$")
"""The closing "choose ..." of an error's allowed text, replaced by a fix for the user's setting."""


def layered_harness(preset: Any, recipe: Recipe, user: dict[str, Any], need: tuple[int, int]) -> HarnessConfig:
    """The harness of preset < recipe < user settings that fits ``need``; a failure blames the user's setting."""
    layers = _Layers(preset, recipe, need)
    try:
        return layers.build(user)
    except ConfigError as exc:
        raise layers.blame(exc, user) from None


__all__ = ["layered_harness"]
