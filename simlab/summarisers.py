"""Summariser modes, registered by name: who writes the summary when a segment is compacted.

    self      the trained policy summarises (SUPO, CompactionRL, AutoCompact): the gradient reaches
              the summary tokens, the learned bottleneck
    frozen    a separate frozen policy checkpoint (ReSum's ReSumTool); by default a frozen copy of the
              run's base checkpoint, or ``train.summariser_checkpoint``
    scripted  the scripted reference agent at quality ``harness.summariser_quality`` (default
              ``base.quality``): a frozen, imperfect summariser
    oracle    the oracle: perfect summaries, the ceiling of the summariser-swap experiment
    none      compaction drops history without a summary

The harness knows ``self``, ``none`` and reference agents itself; ``frozen`` needs a policy, so the
trainer builds it here and hands it to the harness as its summariser agent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simlab.harness.agents import make_agent
from simlab.harness.protocol import Agent
from simlab.registry import Registry

if TYPE_CHECKING:
    from simlab.config import RunConfig

SummariserFactory = Callable[..., Agent | None]
"""(cfg, env, *, seed, base_path) -> the agent that writes summaries, or None (the harness decides)."""

SUMMARISERS: Registry[SummariserFactory] = Registry("harness.summariser")


def _harness_decides(cfg: RunConfig, env: Any, *, seed: int, base_path: Path | None) -> Agent | None:
    return None


def _reference(name: str) -> SummariserFactory:
    def build(cfg: RunConfig, env: Any, *, seed: int, base_path: Path | None) -> Agent | None:
        quality = cfg.harness.summariser_quality
        return make_agent(name, env, seed=seed, quality=cfg.base.quality if quality is None else quality)

    return build


def _frozen(cfg: RunConfig, env: Any, *, seed: int, base_path: Path | None) -> Agent | None:
    import torch

    from simlab.policy.agent import PolicyAgent
    from simlab.policy.checkpoint import load_checkpoint

    path = cfg.train.summariser_checkpoint or base_path
    if path is None:
        raise ValueError("`harness.summariser='frozen'` needs train.summariser_checkpoint or a base checkpoint")
    policy, _ = load_checkpoint(path, expected_vocab_size=cfg.policy.vocab_size,
                                expected_meta={"v_sum": cfg.harness.v_sum})
    policy.eval()
    for p in policy.parameters():
        p.requires_grad_(False)
    return PolicyAgent(policy, int(env.num_envs), temperature=cfg.train.temperature,
                       generator=torch.Generator().manual_seed(seed))


SUMMARISERS.add("self", _harness_decides)
SUMMARISERS.add("frozen", _frozen)
SUMMARISERS.add("scripted", _reference("scripted"))
SUMMARISERS.add("oracle", _reference("oracle"))
SUMMARISERS.add("none", _harness_decides)


def summariser_for(name: str) -> SummariserFactory:
    """The factory of summariser ``name``: a registered mode, else the reference agent of that name (any
    agent in :data:`~simlab.harness.agents.AGENTS`, the names ``harness.summariser`` accepts), so that a
    value that validates always runs."""
    return SUMMARISERS.get(name) if name in SUMMARISERS else _reference(name)
