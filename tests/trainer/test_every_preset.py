"""Every task preset under every recipe: each pair resolves to a run config or is refused in one line that
names the setting, never a traceback (the layers a value crosses: preset, recipe, the user's settings)."""

from __future__ import annotations

import pytest

from simlab.config import resolve
from simlab.errors import ConfigError
from simlab.recipes import RECIPES
from simlab.tasks.presets import PRESETS


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_a_preset_resolves_under_every_recipe_or_is_refused_in_one_line(preset: str) -> None:
    resolved = []
    for recipe in RECIPES.names():
        try:
            cfg = resolve({"task": {"preset": preset}, "train": {"recipe": recipe}})
        except ConfigError as err:
            text = str(err)
            assert "\n" not in text and text.startswith("`") and "is invalid" in text, (recipe, text)
            continue
        assert cfg.preset == preset and cfg.train.recipe == recipe
        resolved.append(recipe)
    assert "supo" in resolved or "react" in resolved, f"{preset}: no recipe resolves"
