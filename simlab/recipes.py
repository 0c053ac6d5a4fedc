"""Recipes: each published method's settings translated to the synthetic scale, registered by name.

A recipe is a set of defaults for the ``harness`` and ``train`` sections; a run's own settings win.
The translation keeps ratios rather than absolute numbers: a 64K working window becomes the preset's
W; a threshold at 0.95 of the window stays 0.95; CompactionRL's budget trigger (10,240 of 64K, 16%)
becomes ``t_comp = W/6``; a response cap of 10,240 tokens (1/6 of the window) becomes ``W/6`` tokens
for the length-adaptive lambda. Group sizes, clip ranges and update counts are kept as published.
docs/training.md's "Recipes: paper settings and their synthetic translation" documents every mapping.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from simlab.harness.config import HarnessConfig, effective_horizon, summary_room
from simlab.registry import Registry

HarnessDefaults = Callable[[dict[str, Any]], dict[str, Any]]
"""(the preset's harness settings) -> harness defaults of the recipe."""
TrainDefaults = Callable[[dict[str, Any]], dict[str, Any]]
"""(the run's resolved harness settings) -> train defaults of the recipe."""


@dataclass(frozen=True)
class Recipe:
    """A published method as harness and train defaults."""

    name: str
    about: str
    """One line: the paper and what the recipe is."""
    harness: HarnessDefaults
    train: TrainDefaults = field(default=lambda harness: {})
    reads: tuple[str, ...] = ()
    """The key paths its defaults are computed from (supo's L from ``harness.window``): a refusal of a value
    it derived names the user's setting among them (:meth:`simlab.settings.Settings.blame`)."""


RECIPES: Registry[Recipe] = Registry("train.recipe")


def _add(recipe: Recipe) -> None:
    RECIPES.add(recipe.name, recipe)


def _fixed(**settings: Any) -> HarnessDefaults:
    return lambda preset: dict(settings)


def _get(settings: dict[str, Any], key: str) -> Any:
    """A harness setting, else ``HarnessConfig``'s default for it."""
    return settings.get(key, HarnessConfig.default(key))


def _supo(preset: dict[str, Any]) -> dict[str, Any]:
    """L = 0.95 W, lowered where a small window must still hold v_sum and the summary after L."""
    window = int(_get(preset, "window"))
    room = (window - 2 - summary_room(int(_get(preset, "summary_tokens")), _get(preset, "summary_budget"))) / window
    # at least 0.01: a window too small for any L is refused by the window check, which names the least window
    return {"trigger": "threshold", "frac": max(0.01, min(0.95, int(room * 100) / 100)), "discard": True,
            "summariser": "self", "tail_steps": 0}


def _budget(preset: dict[str, Any]) -> dict[str, Any]:
    """T_comp = W / 6 (CompactionRL's 10,240 of 64K)."""
    window = int(_get(preset, "window"))
    return {"trigger": "budget", "t_comp": max(window // 6, 1), "tail_steps": 2, "summariser": "self",
            "max_compactions": 3, "discard": False}


def _matched_window(preset: dict[str, Any]) -> dict[str, Any]:
    """Plain GRPO with no compaction, its window widened to the compacting run's effective horizon."""
    window = effective_horizon(window=int(_get(preset, "window")), frac=float(_get(preset, "frac")),
                               max_compactions=int(_get(preset, "max_compactions")), trigger="threshold")
    return {"trigger": "none", "window": window}


def _train(**settings: Any) -> TrainDefaults:
    """GRPO defaults shared by the critic-free recipes (SUPO's clip-higher 0.20 / 0.28, no KL)."""
    grpo = {"group_size": 8, "eps_low": 0.2, "eps_high": 0.28}
    return lambda harness: {**grpo, **settings}

_add(Recipe(
    "supo", "SUPO (arXiv 2510.06727): self-summarisation at L = 0.95 W, rollout-group GRPO, token loss, "
    "overlong mask, discard rule",
    _supo,
    _train(estimator="rollout_group", normaliser="token", overlong_mask=True),
    reads=("harness.window", "harness.summary_tokens", "harness.summary_budget"),
))
_add(Recipe(
    "compactionrl", "CompactionRL (arXiv 2607.05378): budget trigger, k=2 tail, S=3, PPO with a separate "
    "critic, G=1, gae_compaction with length-adaptive lambda (alpha 1.5), token loss",
    _budget,
    lambda h: {"group_size": 1, "critic": "separate", "estimator": "gae_compaction",
               "lam": "response_cap", "alpha": 1.5, "response_cap": max(int(h["window"]) // 6, 2),
               "normaliser": "token", "overlong_mask": False, "value_pretrain_steps": 5, "value_updates": 2,
               "critic_lr_scale": 1.5, "eps_low": 0.2, "eps_high": 0.2},
    reads=("harness.window",),
))
_add(Recipe(
    "resum", "ReSum-GRPO (arXiv 2509.13313): a separate frozen summariser (the scripted agent), "
    "rollout-group advantage broadcast to every segment",
    _fixed(trigger="threshold", summariser="scripted", tail_steps=0),
    _train(estimator="rollout_group", normaliser="token", overlong_mask=False),
))
_add(Recipe(
    "autocompact", "AutoCompact (project page): the policy emits COMPACT itself (threshold as hard "
    "fallback), cold-start demos of compact actions in the base model, trajectory advantage on every token",
    _fixed(trigger="policy", summariser="self", tail_steps=1),
    _train(estimator="rollout_group", normaliser="token", overlong_mask=False),
))
_add(Recipe("react", "ReAct baseline: full history, no compaction; overlong when it no longer fits",
            _fixed(trigger="none"), _train(estimator="rollout_group", normaliser="token")))
_add(Recipe("sliding", "Truncation baseline: drop the oldest steps, no summary",
            _fixed(trigger="sliding"), _train(estimator="rollout_group", normaliser="token")))
_add(Recipe("mem1", "MEM1-like: rewrite a constant-size state after every step",
            lambda p: {"trigger": "every_step", "summariser": "self", "tail_steps": 0,
                       "max_compactions": int(_get(p, "max_steps"))},  # a rewrite per step: S never binds
            _train(estimator="rollout_group", normaliser="token"), reads=("harness.max_steps",)))
_add(Recipe("memagent", "MemAgent-like: summarise every fixed number of steps, overwriting the memory",
            lambda p: {"trigger": "chunked", "summariser": "self", "tail_steps": 0,
                       "max_compactions": int(_get(p, "max_steps"))},  # one memory write per chunk
            _train(estimator="rollout_group", normaliser="token"), reads=("harness.max_steps",)))
_add(Recipe("grpo", "Plain GRPO with no compaction at the same effective horizon L x (S+1)",
            _matched_window, _train(estimator="rollout_group", normaliser="token"),
            reads=("harness.window", "harness.frac", "harness.max_compactions")))
