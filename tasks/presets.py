"""Task presets: named parameter sets sized for a tiny transformer on a 2-core CPU.

Each preset pairs a task config with the harness settings it was calibrated under (window W, trigger,
summary length m, tail k, caps S and H). ``simlab inspect --task NAME`` runs one; the README's preset table has
their oracle / scripted / random success rates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from simlab.tasks.config import ConfigError, KeyRecallConfig, PointerChaseConfig, TaskConfig


@dataclass(frozen=True)
class Preset:
    name: str
    env_id: str
    """The Gymnasium id, e.g. ``simlab/KeyRecall-v0``."""
    task: TaskConfig
    harness: dict[str, Any] = field(default_factory=dict)
    """``HarnessConfig`` fields this preset was calibrated with."""
    about: str = ""
    policy: dict[str, Any] = field(default_factory=dict)
    """Policy shape the preset is sized for (``simlab.policy.PolicyConfig`` fields)."""
    base: dict[str, Any] = field(default_factory=dict)
    """Base-model settings (``simlab.config.BaseConfig`` fields) that give a competent, imperfect start."""
    train: dict[str, Any] = field(default_factory=dict)
    """RL settings (``simlab.config.TrainConfig`` fields) the preset learns with; a recipe's own win."""


_KR = "simlab/KeyRecall-v0"
_PC = "simlab/PointerChase-v0"

PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("keyrecall-tiny", _KR, KeyRecallConfig(),
               dict(window=96, frac=0.8, summary_tokens=6, tail_steps=1, max_compactions=6, max_steps=40),
               "6 facts, a 3-fact summary, ~2-3 compactions per rollout"),
        Preset("keyrecall-mini", _KR,
               KeyRecallConfig(num_facts=1, horizon=(8, 10), vocab_size=24, obs_tokens=(3, 5), hard_frac=0.0,
                               fact_frac=0.25),
               # CompactionRL's geometry (k = 2 tail steps, S = 3, T_comp = W / 6) does not fit W = 32:
               # every one of its rollouts is overlong there; it needs W >= 64 (README, "Policy and training")
               dict(window=32, frac=0.8, summary_tokens=2, tail_steps=1, max_compactions=6, max_steps=16),
               "the demo preset: 1 fact in the first 2 steps, a 1-pair summary, 2-3 compactions",
               # 80 behaviour-cloning steps give a summariser that keeps the fact part of the time:
               # competent but imperfect, the start RL needs (README, "Policy and training")
               policy=dict(n_layer=2, n_head=4, d_model=64),
               base=dict(steps=80, episodes=64, lr=1e-3),
               # lr 3e-3 undoes the base model within a few steps; 6e-4 with 256 rollouts per step
               # improves it (README, "Policy and training")
               train=dict(lr=6e-4, prompts=32, steps=40)),
        Preset("keyrecall-heavy", _KR,
               KeyRecallConfig(horizon=(20, 28), tail_prob=0.08, tail_tokens=40),
               dict(window=128, frac=0.75, summary_tokens=6, tail_steps=1, max_compactions=8, max_steps=48),
               "heavy-tail observations of 40 tokens: the discard rule matters"),
        Preset("keyrecall-corr-pos", _KR, KeyRecallConfig(compaction_reward_corr=0.8),
               dict(window=96, frac=0.8, summary_tokens=6, tail_steps=1, max_compactions=8, max_steps=40),
               "easy instances get padded: more compactions go with success"),
        Preset("keyrecall-corr-neg", _KR, KeyRecallConfig(compaction_reward_corr=-0.8),
               dict(window=96, frac=0.8, summary_tokens=6, tail_steps=1, max_compactions=8, max_steps=40),
               "hard instances get padded: more compactions go with failure (the seed's bad case)"),
        Preset("pointerchase-tiny", _PC, PointerChaseConfig(),
               dict(window=96, frac=0.8, summary_tokens=4, tail_steps=1, max_compactions=8, max_steps=40),
               "12 nodes, 2 links per table, 16-24 moves, a 4-token state summary"),
        Preset("pointerchase-long", _PC, PointerChaseConfig(horizon=(32, 48)),
               dict(window=128, frac=0.8, summary_tokens=4, tail_steps=1, max_compactions=10, max_steps=64),
               "32-48 moves: credit must cross many segments"),
    )
}


def get_preset(name: str) -> Preset:
    if name not in PRESETS:
        raise ConfigError(f"`task={name!r}` is invalid; choose one of {tuple(PRESETS)}")
    return PRESETS[name]
