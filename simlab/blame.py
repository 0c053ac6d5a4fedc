"""Blame for a bad harness value: the user's setting it came from, and the nearest value that works.

A run's harness is layered preset < recipe < user (:func:`simlab.config.resolve`). When the result fails
its checks, the error is re-keyed to the user's setting that caused it (a recipe derives supo's frac from
``harness.window``; a preset's window clashes with a long ``harness.summary_tokens``), with the nearest
value of that setting that works.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from simlab.errors import ConfigError
from simlab.harness.config import HarnessConfig
from simlab.recipes import Recipe

NEAR = 16
"""Steps tried one by one on each side of a bad value before the search gallops: a narrow band of valid
values right beside it is found exactly."""
FAR = 2**31
"""Farthest a galloping search looks from the bad value (a setting's own bound stops it sooner)."""


def _distances(value: int, sign: int) -> Iterator[int]:
    """How far from ``value`` a search past :data:`NEAR` looks, outward: 2 NEAR, 4 NEAR, ... up to
    :data:`FAR`; going down, once a step would pass 0, halfway to 0 again and again, then 0 itself (so a
    band that ends well above 0, such as ``[1, 27]`` seen from 60, is not jumped over)."""
    step = 2 * NEAR
    while step < FAR and (sign > 0 or step < value):
        yield step
        step *= 2
    if sign < 0:
        rest = value - step // 2  # the lowest value probed so far
        while rest > 0:
            rest //= 2
            yield value - rest


def _first_working(value: int, sign: int, works: Callable[[int], bool]) -> int | None:
    """The valid value nearest ``value`` on one side (``sign`` +1 up, -1 down) past :data:`NEAR`.

    Looks at :func:`_distances` to the first value that works, then bisects between it and the last that
    failed: for one integer setting with the others fixed the valid values are an interval (every window
    check is a linear inequality in it), so the boundary found is the nearest one whenever a probe lands
    in the interval (one does when it is at least as wide as its distance from ``value``, as a setting's
    valid values running to its bound are). Whatever it returns works; a narrow band may be passed over.
    """
    failed = NEAR
    for step in _distances(value, sign):
        if works(value + sign * step):
            while step - failed > 1:  # works at step, fails at failed
                mid = (failed + step) // 2
                failed, step = (failed, mid) if works(value + sign * mid) else (mid, step)
            return value + sign * step
        failed = step
    return None


def _nearest(value: int, works: Callable[[int], bool]) -> str | None:
    """``choose an integer >= n`` (or ``<= n``) for the valid value closest to ``value``, if there is one.

    One by one for :data:`NEAR` steps each way (a tie goes up), then a galloping search on each side:
    about 100 configurations at most, where a scan to 4,096 built 8,192 and missed a fix farther away.
    """
    for step in range(1, NEAR + 1):
        for cand, how in ((value + step, ">="), (value - step, "<=")):
            if cand >= 0 and works(cand):
                return f"choose an integer {how} {cand}"
    up, down = _first_working(value, 1, works), _first_working(value, -1, works)
    if up is None and down is None:
        return None
    if down is None or (up is not None and up - value <= value - down):
        return f"choose an integer >= {up}"
    return f"choose an integer <= {down}"


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
