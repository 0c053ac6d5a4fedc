"""Base quality: what the base model's summaries are worth before any RL.

An RL result about summaries says nothing where the base's summaries do nothing, so every run measures
its base on a set of instances three ways, under the run's harness with the summaries written by the player
itself:

- the base (``base``): the behaviour-cloned policy, summarising for itself;
- its teacher (``teacher``): the reference agent it was cloned from, on the same instances and the run's
  task, an upper reference;
- its floor (``floor``): the same base with its summaries emptied (``harness.summariser = "none"``:
  compaction keeps the prompt and the tail and nothing else), what the policy does without memory.

The gain is the base's success over its floor's, paired by instance (both play the same instances, with the
same sampling stream), with its SE over instances. A base is *clearly above its floor* when the gain
exceeds :data:`CLEAR_SIGMAS` SEs. Behaviour cloning runs the same measurement on its own check set
(``base.check_every``); the run measures it on its held-out set (``eval.base_quality``) and logs it under
``base/heldout*`` at step 0.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from simlab import names
from simlab.config import RunConfig
from simlab.errors import BaseGateError
from simlab.harness import HarnessConfig, RolloutBatch
from simlab.policy.model import Policy
from simlab.run_sections import EVAL_SEED_STRIDE, RUN_EVAL_SEEDS
from simlab.segments import succeeded
from simlab.stores import file_lock
from simlab.train.identity import base_seed
from simlab.train.rollouts import collect, rollout_metrics

CLEAR_SIGMAS = 2.0
"""A base is clearly above its floor when its gain over the floor exceeds this many SEs (over instances)."""
CHECK_SEEDS = RUN_EVAL_SEEDS + EVAL_SEED_STRIDE // 2
"""Where the check sets of behaviour cloning start: base seed b checks on the instances from
``CHECK_SEEDS + b * EVAL_SEED_STRIDE``, the second half of run seed b's held-out stride, apart from every
run's held-out set (``eval.seed = "run"`` uses the first half) and a function of the base alone, so a base
shared by several run seeds is checked the same whichever run built it."""


@dataclass(frozen=True)
class Quality:
    """One measurement: per-instance success of the base, its floor and (held-out only) its teacher."""

    base: np.ndarray
    floor: np.ndarray
    teacher: np.ndarray | None = None

    @property
    def gain(self) -> float:
        """The base's success over its floor's (a rate difference), paired by instance."""
        return float(np.mean(self.base - self.floor))

    @property
    def gain_se(self) -> float:
        """SE of :attr:`gain` over instances (the paired differences' SD / sqrt(n))."""
        d = self.base - self.floor
        return float(np.std(d, ddof=1) / math.sqrt(d.size)) if d.size > 1 else math.nan

    @property
    def clear(self) -> bool:
        """Whether the base is clearly above its floor (:data:`CLEAR_SIGMAS`)."""
        se = self.gain_se
        return self.gain > CLEAR_SIGMAS * se if se > 0 else self.gain > 0

    def describe(self) -> str:
        """``success 41.4%, floor 17.2% (+24.2 ± 3.1 points)``: the gate's and the report's wording."""
        return (f"success {100 * self.base.mean():.1f}%, floor {100 * self.floor.mean():.1f}% "
                f"({100 * self.gain:+.1f} ± {100 * self.gain_se:.1f} points)")


def quality_harness(cfg: RunConfig, summariser: str = "self") -> HarnessConfig:
    """The run's harness with the summaries written by the player itself (``self``) or emptied (``none``)."""
    return cfg.harness.replace(summariser=summariser, summariser_loss=0.0)


def _successes(rb: RolloutBatch) -> np.ndarray:
    return succeeded(np.array([r.reward for r in rb.rollouts])).astype(np.float64)


def _play(cfg: RunConfig, policy: Policy, summariser: str, *, seed: int, episodes: int) -> RolloutBatch:
    """The policy on ``episodes`` instances from ``seed``, greedy or sampled as the evaluation plays, with a
    sampling stream of its own seeded alike for the base and its floor (so their draws pair)."""
    gen = torch.Generator(device=policy.device).manual_seed(seed)
    rb, _, _ = collect(cfg, policy, harness=quality_harness(cfg, summariser), prompts=episodes, group_size=1,
                       seed=seed, generator=gen)
    return rb


def measure(cfg: RunConfig, policy: Policy, *, seed: int, episodes: int,
            teacher: bool = False) -> tuple[Quality, dict[str, RolloutBatch]]:
    """The base and its floor (and with ``teacher`` the teacher) on ``episodes`` instances from ``seed``."""
    batches = {"base": _play(cfg, policy, "self", seed=seed, episodes=episodes),
               "floor": _play(cfg, policy, "none", seed=seed, episodes=episodes)}
    if teacher:
        batches["teacher"], _, _ = collect(cfg, None, harness=quality_harness(cfg), prompts=episodes, group_size=1,
                                           seed=seed, teacher=cfg.base.teacher, task=cfg.task)
    quality = Quality(**{k: _successes(rb) for k, rb in batches.items()})
    return quality, batches


def check_seed(cfg: RunConfig) -> int:
    """The first instance of the base's check set (:data:`CHECK_SEEDS`)."""
    return CHECK_SEEDS + base_seed(cfg) * EVAL_SEED_STRIDE


def check_metrics(quality: Quality) -> dict[str, float]:
    """What a cloning check logs: the base's and the floor's success and the gain with its SE."""
    return {names.BASE_CHECK_SUCCESS: float(quality.base.mean()),
            names.BASE_CHECK_FLOOR_SUCCESS: float(quality.floor.mean()),
            names.BASE_CHECK_GAIN: quality.gain, names.BASE_CHECK_GAIN_SE: quality.gain_se}


def heldout_metrics(quality: Quality, batches: dict[str, RolloutBatch]) -> dict[str, float]:
    """What a run logs at step 0: each player's rollout metrics under its prefix, the gain over the floor
    with its SE, whether the base is clearly above it, and the teacher's lead over the base."""
    out: dict[str, float] = {}
    for who, rb in batches.items():
        out.update(rollout_metrics(rb, names.BASE_HELDOUT_PREFIXES[who]))
    out[names.BASE_GAIN] = quality.gain
    out[names.BASE_GAIN_SE] = quality.gain_se
    out[names.BASE_ABOVE_FLOOR] = float(quality.clear)
    if quality.teacher is not None:
        out[names.BASE_TEACHER_LEAD] = float(np.mean(quality.teacher - quality.base))
    return out


def heldout_quality(cfg: RunConfig, policy: Policy, base_path: Path) -> dict[str, float]:
    """The base's held-out quality metrics (:func:`heldout_metrics`) on the run's held-out set, cached beside
    the base checkpoint per held-out set and harness: arms that share a base and a seed measure it once."""
    path = base_path.with_suffix("") / "quality" / f"{_heldout_key(cfg)}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path, ".lock"):
        cached = _read(path)
        if cached is not None:
            return cached
        quality, batches = measure(cfg, policy, seed=cfg.eval_seed, episodes=cfg.eval.episodes, teacher=True)
        metrics = heldout_metrics(quality, batches)
        path.write_text(json.dumps(metrics, sort_keys=True), encoding="utf-8")
    return metrics


def _read(path: Path) -> dict[str, float] | None:
    """A cached measurement, or None where there is none (or a crash left it unreadable)."""
    try:
        return {k: float(v) for k, v in json.loads(path.read_text(encoding="utf-8")).items()}
    except (OSError, ValueError, AttributeError):
        return None


def _heldout_key(cfg: RunConfig) -> str:
    """What a held-out measurement depends on besides the base: the instances, the harness, the task, the
    teacher and the sampling."""
    payload: dict[str, Any] = {"seed": cfg.eval_seed, "episodes": cfg.eval.episodes,
                               "harness": cfg.harness.model_dump(mode="json"),
                               "task": cfg.task.model_dump(mode="json"), "temperature": cfg.train.temperature,
                               "teacher": [cfg.base.teacher, cfg.base.quality, cfg.base.compact_hazard]}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


def gate(cfg: RunConfig, check: dict[str, Any] | None) -> None:
    """Raise :class:`BaseGateError` where ``base.min_gain`` is set and the base's last check (the
    checkpoint's ``meta["check"]``) missed it."""
    need = cfg.base.min_gain
    if need is None:
        return
    if check is None:
        raise BaseGateError.invalid("base.min_gain", need, "the cached base checkpoint holds no check; rebuild it "
                                    "(base.cache = false) or choose None")
    if 100 * check["metrics"][names.BASE_CHECK_GAIN] < need:
        raise BaseGateError(
            f"base model of seed {base_seed(cfg)} missed the gate `base.min_gain={need!r}` after {check['steps']} "
            f"cloning steps: {check['text']} on {check['episodes']} check instances; clone longer "
            "(base.max_steps), or lower base.min_gain",
            key="base.min_gain", value=need, allowed="")
