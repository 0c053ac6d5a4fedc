"""Playing the task: rollouts of the policy (or a reference teacher) on the run's envs, held-out
evaluation in both configurations, and the metrics and per-episode rows they give.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import polars as pl
import torch

from simlab import (
    names,
    tasks,  # noqa: F401  (registers the simlab/ envs)
)
from simlab.config import RunConfig
from simlab.harness import HarnessConfig, RolloutBatch, make_agent, run_rollouts
from simlab.harness.records import RolloutRecord
from simlab.harness.stats import compaction_by_index, summary_content, tied_groups
from simlab.policy.agent import PolicyAgent
from simlab.policy.model import Policy
from simlab.segments import succeeded
from simlab.summarisers import summariser_for
from simlab.train.identity import base_task


def make_env(cfg: RunConfig, num_envs: int, task: Any = None) -> Any:
    """``num_envs`` envs of the run's task (or of ``task``, a config of the same env)."""
    return gymnasium.make_vec(cfg.env_id, num_envs=num_envs, vectorization_mode="vector_entry_point",
                              config=cfg.task if task is None else task)


def collect(
    cfg: RunConfig,
    policy: Policy | None,
    *,
    harness: HarnessConfig,
    prompts: int,
    group_size: int,
    seed: int,
    greedy: bool = False,
    generator: torch.Generator | None = None,
    teacher: str | None = None,
    base_path: Path | None = None,
    fracs: np.ndarray | None = None,
    task: Any = None,
) -> tuple[RolloutBatch, Any, PolicyAgent | None]:
    """Run ``prompts x group_size`` rollouts with the policy (or a reference ``teacher``, on the task
    ``base.teach`` names: its rollouts are demonstrations; or on ``task`` when given).

    Returns the batch, the env (for its phase masks) and the policy agent (its counters say what the
    trunk processed: tokens and attended keys), or None for a teacher.
    """
    n = prompts * group_size
    if task is None and teacher is not None:
        task = base_task(cfg)  # a teacher's demonstrations are played on the task base.teach names
    env = make_env(cfg, n, task)
    frozen = summariser_for(harness.summariser)(cfg, env, seed=seed + 7, base_path=base_path)
    if teacher is not None:
        hazard = cfg.base.compact_hazard  # an early-compacting teacher is built here; a plain one by name
        actor = teacher if not hazard else make_agent(teacher, env, seed=seed, quality=cfg.base.quality,
                                                      compact_hazard=hazard)
        rb = run_rollouts(env, actor, harness, seed=seed, group_size=group_size, summariser=frozen,
                          quality=cfg.base.quality)
        return rb, env, None
    assert policy is not None
    policy.eval()
    agent = PolicyAgent(policy, n, temperature=cfg.train.temperature, greedy=greedy, generator=generator)
    rb = run_rollouts(env, agent, harness, seed=seed, group_size=group_size, summariser=frozen, fracs=fracs)
    return rb, env, agent


def rollout_metrics(rb: RolloutBatch, prefix: str) -> dict[str, float]:
    """A rollout batch's success, return (per rollout and per row), overlong, segment and summary metrics, and
    summary length by compaction index, under ``prefix``."""
    rewards = np.array([r.reward for r in rb.rollouts])
    finished = np.array([r.finished for r in rb.rollouts])
    segments = rb.batch.segments_per_rollout
    compacted = segments > 1
    out = {
        names.SUCCESS: float(np.mean(succeeded(rewards))),
        names.RETURN: float(rewards.mean()),
        names.OVERLONG_RATE: float(1.0 - finished.mean()),
        names.SEGMENTS_MEAN: float(segments.mean()),
        names.COMPACTION_RATE: float(compacted.mean()),
        names.STEPS: float(np.mean([r.steps for r in rb.rollouts])),
        names.SUMMARISED_SUCCESS: float(np.mean(succeeded(rewards[compacted]))) if compacted.any() else math.nan,
        names.RETURN_PER_ROW: float(rb.batch.row_reward[rb.batch.is_real].mean()),
        **summary_content(rb.rollouts),
        **compaction_by_index(rb.rollouts),
    }
    return {names.metric(prefix, k): v for k, v in out.items()}


def group_metrics(rb: RolloutBatch, prefix: str) -> dict[str, float]:
    """The shares of a training batch's prompt groups that tie (:func:`~simlab.harness.stats.tied_groups`),
    under ``prefix``: on the rewards the rollouts scored, before any per-segment cost shapes them."""
    tied = tied_groups(rb.batch.rewards, rb.batch.groups)
    return {names.metric(prefix, k): v for k, v in tied.items()}


def cost_metrics(agent: PolicyAgent, episodes: int, prefix: str) -> dict[str, float]:
    """What the trunk spent per episode: tokens processed, keys attended, forward MFLOPs."""
    tokens, keys = agent.prefilled_tokens / episodes, agent.attended_keys / episodes
    return {
        names.metric(prefix, names.EPISODES): float(episodes),
        names.metric(prefix, names.TOKENS_PER_EPISODE): tokens,
        names.metric(prefix, names.KEYS_PER_EPISODE): keys,
        names.metric(prefix, names.MFLOPS_PER_EPISODE): agent.policy.forward_flops(tokens, keys) / 1e6,
    }


def episode_rows(rb: RolloutBatch, evaluation: str, first_instance: int, step: int) -> pl.DataFrame:
    """One row per held-out episode of an evaluation (:data:`simlab.names.EPISODE_COLUMNS`, then
    :data:`simlab.names.EPISODE_SUMMARY_COLUMNS`).

    Episode j of an evaluation plays instance ``first_instance + j`` (one rollout per prompt), so the
    arms of a seed and the evaluations of a run line up by instance.
    """
    rewards = np.array([r.reward for r in rb.rollouts], dtype=np.float32)
    n = rewards.size
    return pl.DataFrame({
        "step": np.full(n, step, dtype=np.int32),
        "evaluation": [evaluation] * n,
        "instance": np.arange(first_instance, first_instance + n, dtype=np.int64),
        "success": succeeded(rewards).astype(np.int8),
        "reward": rewards,
        "segments": rb.batch.segments_per_rollout.astype(np.int16),
        "tokens": np.array([r.tokens for r in rb.rollouts], dtype=np.int32),
        "overlong": np.array([not r.finished for r in rb.rollouts], dtype=np.bool_),
        "summaries": np.array([r.summaries for r in rb.rollouts], dtype=np.int16),
        "summaries_holding_answer": pl.Series([_holding_answer(r) for r in rb.rollouts], dtype=pl.Int16),
    }).select(*names.EPISODE_COLUMNS, *names.EPISODE_SUMMARY_COLUMNS)


def _holding_answer(rollout: RolloutRecord) -> int | None:
    """How many of a rollout's summaries held its answer; None where it wrote some and no probe said what they
    held (an env without ``Instances.summary_holds``)."""
    applied, held = rollout.summaries_holding("answer")
    return held if applied or rollout.summaries == 0 else None


def evaluate(
    cfg: RunConfig, policy: Policy, base_path: Path | None = None, *, final: bool = True, step: int = 0
) -> tuple[dict[str, float], pl.DataFrame]:
    """Held-out success in both configurations (compacted: the run's harness; single-window), and the
    per-episode outcomes behind it.

    ``final``: the full held-out set (``eval.episodes``) in every configuration the run asks for; else an
    intermediate evaluation, which plays the first ``eval.curve_episodes`` of the set, single-window only
    when ``eval.curve_single_window``.
    """
    metrics: dict[str, float] = {}
    rows = []
    episodes = cfg.eval.episodes if final else cfg.eval.curve_size
    configs = [(names.EVAL_COMPACTED, "compacted", cfg.harness)]
    if cfg.eval.single_window and (final or cfg.eval.curve_single_window):
        configs.append((names.EVAL_SINGLE_WINDOW, "single_window", cfg.harness.replace(trigger="none")))
    gen = torch.Generator(device=policy.device).manual_seed(cfg.eval_seed)
    for prefix, evaluation, harness in configs:
        rb, _, agent = collect(cfg, policy, harness=harness, prompts=episodes, group_size=1,
                               seed=cfg.eval_seed, generator=gen, base_path=base_path)
        metrics.update(rollout_metrics(rb, prefix))
        assert agent is not None
        metrics.update(cost_metrics(agent, episodes, prefix))
        rows.append(episode_rows(rb, evaluation, cfg.eval_seed, step))
    return metrics, pl.concat(rows)
