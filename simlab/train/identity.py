"""The base model's identity: the task, harness, seed and settings it is cloned under, and the key its
checkpoint is cached under (:func:`base_path`; building and reusing it is :mod:`simlab.train.base`'s).
Every rule that decides whether two runs share a base model is here, with the one re-key policy
(:data:`KEYED_LATER`).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from simlab.config import RunConfig
from simlab.harness import HarnessConfig
from simlab.run_sections import RUN_EVAL_SEEDS
from simlab.tasks.config import TaskConfig
from simlab.tasks.presets import LATER_FIELDS, get_preset

KEYED_LATER: dict[str, Any] = {
    **{f"task.{name}": before for name, before in LATER_FIELDS.items() if name != "reread"},
    "harness.summary_budget": None,
    "base.teach": "task", "base.compact_hazard": 0.0, "base.check_every": None, "base.check_episodes": 128,
    "base.max_steps": None, "base.min_gain": None, "base.patience": None, "base.summary_weight": 1.0,
    "clone_seeds": RUN_EVAL_SEEDS,
}
"""The one re-key policy: a setting added after base models were first keyed (by its place in the key, see
:func:`base_key`) with the value every earlier base had. At that value it is left out of the key, so adding a
setting never re-keys the bases built before it; at any other value it is keyed. A new setting that changes what
cloning does goes here with its default (``reread`` is keyed since it was added: it is not here); the key pins
in tests/trainer/test_teach.py fail when one is missed."""
NOT_KEYED = ("base.cache",)
"""Settings that decide whether a cached base is reused, not what it is."""


def base_seed(cfg: RunConfig) -> int:
    """The seed the base model is built with: ``base.seed``, or the run's seed when it is ``"run"``."""
    return cfg.seed if cfg.base.seed == "run" else int(cfg.base.seed)


def base_task(cfg: RunConfig) -> TaskConfig:
    """The task the base model's demonstrations are played on (``base.teach``)."""
    return cfg.task.full_information() if cfg.base.teach == "full" else cfg.task


def base_harness_settings(cfg: RunConfig) -> dict[str, Any]:
    """Harness settings of the base model's demonstrations (:func:`base_harness`): the preset's harness with
    the run's context geometry, the policy as summariser, and the ``policy`` trigger where the teacher
    demonstrates COMPACT."""
    geometry = ("window", "summary_tokens", "summary_budget", "max_compactions", "max_steps", "v_sum")
    settings = {**get_preset(cfg.preset).harness, **{k: getattr(cfg.harness, k) for k in geometry}}
    settings["summariser"] = "self"
    if cfg.base.compact_demos:
        settings["trigger"] = "policy"
    return settings


def base_harness(cfg: RunConfig) -> HarnessConfig:
    """Where demonstrations are collected: the preset's harness with the run's context geometry.

    The geometry (window, summary length, caps, v_sum) must match the run, since the policy's context
    and summary sizes follow it; the trigger is ``policy`` so the teacher also demonstrates when to emit
    COMPACT. Recipes that differ only in trigger, tail, discard or threshold share one base model.
    """
    return HarnessConfig().replace(**base_harness_settings(cfg))


def base_key(cfg: RunConfig) -> str:
    """Address of ``cfg``'s base checkpoint: the task it is taught on (:func:`base_task`), its harness
    (:func:`base_harness_settings`), the policy shape, ``base`` with :func:`base_seed`, and the instance range
    its demonstrations are drawn below (``clone_seeds``, which a numeric ``eval.seed`` moves); the settings of
    :data:`KEYED_LATER` at their earlier value and :data:`NOT_KEYED` left out. Tasks that differ only in what
    ``teach = "full"`` takes away (PeekRead's coupling) share one base model."""
    payload: dict[str, Any] = {
        "env": cfg.env_id, "task": base_task(cfg).model_dump(mode="json"), "harness": base_harness_settings(cfg),
        "policy": cfg.policy.model_dump(mode="json", exclude={"value_head"}),  # heads are added later
        "base": {**cfg.base.model_dump(mode="json"), "seed": base_seed(cfg)},
        "v_sum": cfg.harness.v_sum, "clone_seeds": cfg.train_seed_limit,
    }
    for path in (*KEYED_LATER, *NOT_KEYED):
        section, _, name = path.rpartition(".")
        table = payload[section] if section else payload
        if name in table and (path in NOT_KEYED or table[name] == KEYED_LATER[path]):
            del table[name]
    blob = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def base_path(cfg: RunConfig, store: Path) -> Path:
    """Where ``cfg``'s base checkpoint is cached under the store folder."""
    return Path(store) / "base" / f"{cfg.preset}-{base_key(cfg)}.pt"
