"""Calibration statistics of a ``RolloutBatch``: what ``simlab inspect`` prints."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import numpy as np

from simlab import names
from simlab.errors import ConfigError
from simlab.harness.agents import SCRIPTED_QUALITY
from simlab.harness.protocol import Agent
from simlab.harness.records import RolloutBatch, RolloutRecord


def corr(x: np.ndarray, y: np.ndarray) -> float:
    """Pearson correlation; NaN when either side is constant."""
    if x.size < 2 or x.std() == 0 or y.std() == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def cluster_se(values: np.ndarray, groups: np.ndarray) -> float:
    """SE of the mean of ``values`` when the rollouts of a group share one instance: the SD of the group
    means over sqrt(number of groups), so G rollouts of one prompt count as one draw of the instance."""
    means = np.bincount(groups, weights=values)[np.unique(groups)] / np.bincount(groups)[np.unique(groups)]
    return float(means.std(ddof=1) / math.sqrt(means.size)) if means.size > 1 else math.nan


def first_actions(batch: RolloutBatch) -> np.ndarray:
    """(R,) the first action token of each rollout (-1 where its first action was not kept, e.g. dropped
    by the discard rule): the route of tasks whose first action chooses one (PeekRead)."""
    from simlab.harness.protocol import Phase

    out = np.full(len(batch.rollouts), -1, dtype=np.int64)
    for i, rec in enumerate(batch.rollouts):
        seg = batch.segments[rec.segment_rows[0]]
        acts = np.flatnonzero(seg.phase == int(Phase.ACT))
        if acts.size:
            out[i] = int(seg.tokens[acts[0]])
    return out


def route_stats(segs: np.ndarray, reward: np.ndarray, groups: np.ndarray, first: np.ndarray) -> dict[str, Any]:
    """Per first action (the route): its share, success, mean K, and K's in-group SD and corr(K, R) among
    the rollouts of a group that took it (the coupling within a route, free of the route's own effect)."""
    from simlab.segments import within_group_stats

    out: dict[str, Any] = {}
    for tok in np.unique(first):
        on = first == tok
        _, codes = np.unique(groups[on], return_inverse=True)
        within = within_group_stats(segs[on], reward[on], codes)
        out[str(int(tok))] = {"share": float(on.mean()), "success_rate": float(reward[on].mean()),
                              "mean_segments": float(segs[on].mean()), "within_group": within}
    return out


def rollout_stats(batches: list[RolloutBatch]) -> dict[str, Any]:
    """Success, segment counts, compaction and overlong rates, corr(segments, reward), working context,
    effective horizon and throughput over one or more batches run with the same config."""
    from simlab.segments import within_group_stats

    recs = [r for b in batches for r in b.rollouts]
    cfg = batches[0].config
    groups = np.concatenate([b.batch.groups + sum(x.batch.num_groups for x in batches[:i])
                             for i, b in enumerate(batches)])
    reward = np.array([r.reward for r in recs])
    segs = np.array([r.compactions + 1 for r in recs])
    finished = np.array([r.finished for r in recs])
    ctx = np.concatenate([r.context_lengths for r in recs])
    seconds = sum(b.total_seconds for b in batches)
    env_s = sum(b.env_seconds for b in batches)
    agent_s = sum(b.agent_seconds for b in batches)
    tokens = sum(r.tokens for r in recs)
    n = len(recs)
    return {
        "rollouts": n,
        "success_rate": float(reward.mean()),
        "success_se": cluster_se(reward, groups),
        "segments_distribution": {int(k): int(v) for k, v in sorted(Counter(segs.tolist()).items())},
        "mean_segments": float(segs.mean()),
        "compaction_rate": float((segs > 1).mean()),
        "mean_compactions": float((segs - 1).mean()),
        "overlong_rate": float((~finished).mean()),
        "overlong_reasons": dict(Counter(r.overlong for r in recs if not r.finished)),
        "corr_segments_reward": corr(segs.astype(float), reward),
        "group_size": int(np.bincount(groups).max()),
        "within_group": within_group_stats(segs, reward, groups),
        "routes": route_stats(segs, reward, groups, np.concatenate([first_actions(b) for b in batches])),
        "working_context_mean": float(ctx.mean()),
        "working_context_max": int(ctx.max()),
        "window": cfg.window,
        "threshold": cfg.threshold,
        "effective_horizon": cfg.effective_horizon,
        "mean_steps": float(np.mean([r.steps for r in recs])),
        "seconds": seconds,
        "tokens_per_s": tokens / seconds if seconds > 0 else math.nan,
        "rollouts_per_s": n / seconds if seconds > 0 else math.nan,
        "time_share": {
            "env": env_s / seconds,
            "agent": agent_s / seconds,
            "harness": (seconds - env_s - agent_s) / seconds,
        }
        if seconds > 0
        else {},
        "v_sum": batches[0].v_sum_version,
        "summaries": summary_content(recs),
    }


def summary_content(rollouts: list[RolloutRecord]) -> dict[str, float]:
    """What the rollouts' summaries were, under :mod:`simlab.names`' keys: their length (mean and quantiles),
    the share cut at their budget, and of the summaries each key of the task's probe applied to
    (:data:`simlab.names.SUMMARY_HOLDS`), the share holding it; NaN where none were."""
    lengths = np.array([n for r in rollouts for n in r.summary_lengths], dtype=np.float64)
    written = sum(r.summaries for r in rollouts)
    out = {names.SUMMARY_LENGTH: float(lengths.mean()) if lengths.size else math.nan,
           names.SUMMARY_CUT: sum(r.summaries_cut for r in rollouts) / written if written else math.nan}
    for q, key in zip(names.QUANTILES, names.SUMMARY_LENGTH_QUANTILES, strict=True):
        out[key] = float(np.quantile(lengths, q)) if lengths.size else math.nan
    for key, name in names.SUMMARY_HOLDS.items():
        applied = sum(r.summaries_holding(key)[0] for r in rollouts)
        held = sum(r.summaries_holding(key)[1] for r in rollouts)
        out[name] = held / applied if applied else math.nan
    return out


def compaction_by_index(rollouts: list[RolloutRecord]) -> dict[str, float]:
    """Summary length by compaction index and the context around a compaction, under :mod:`simlab.names`'
    keys (:data:`~simlab.names.COMPACTION_BY_INDEX`): the mean length of each rollout's first, second, ...
    summary (the last bucket pools those from :data:`~simlab.names.SUMMARY_INDEX_CAP` on), and the mean context
    before and after a compaction. A summary that shrinks as a rollout goes on, or a tail that keeps more, shows
    here and not in the pooled mean; NaN where no rollout got that far."""
    cap = names.SUMMARY_INDEX_CAP
    indexed = [(min(i, cap), n) for r in rollouts for i, n in enumerate(r.summary_lengths, start=1)]
    out = {key: _mean([n for i, n in indexed if i == index])
           for index, key in enumerate(names.SUMMARY_LENGTH_BY_INDEX, start=1)}
    out[names.CONTEXT_BEFORE_COMPACTION] = _mean([n for r in rollouts for n in r.context_before])
    out[names.CONTEXT_AFTER_COMPACTION] = _mean([n for r in rollouts for n in r.context_after])
    return out


def _mean(values: list[int]) -> float:
    """The mean of ``values``; NaN for none."""
    return float(np.mean(values)) if values else math.nan


def tied_groups(rewards: np.ndarray, groups: np.ndarray) -> dict[str, float]:
    """Shares of the prompt groups whose rewards are all 0, all 1, and all equal (:data:`~simlab.names.GROUPS`).

    A group whose rewards are all equal has group-relative advantages of 0: it spends rollouts and carries no
    GRPO gradient. Groups of one rollout (an evaluation, PPO with G = 1) are tied by construction and left out;
    NaN when no group has two.

    Args:
        rewards: (R,) each rollout's reward.
        groups: (R,) its prompt group's code, 0..num_groups-1.
    """
    size = np.bincount(groups)
    low, high = np.full(size.size, np.inf), np.full(size.size, -np.inf)
    np.minimum.at(low, groups, rewards)
    np.maximum.at(high, groups, rewards)
    kept = size > 1
    if not kept.any():
        return dict.fromkeys(names.GROUPS, math.nan)
    tied = kept & (low == high)
    return {names.GROUP_ALL_FAIL: float((tied & (low == 0.0)).sum() / kept.sum()),
            names.GROUP_ALL_SUCCESS: float((tied & (low == 1.0)).sum() / kept.sum()),
            names.GROUP_NO_GRADIENT: float(tied.sum() / kept.sum())}


def _summary_lines(content: dict[str, float]) -> list[str]:
    """What the summaries were: length, and with a cue the shares holding the cued fact and another."""
    if math.isnan(content[names.SUMMARY_LENGTH]):
        return []
    q = [content[key] for key in names.SUMMARY_LENGTH_QUANTILES]
    line = f"  summaries        mean {content[names.SUMMARY_LENGTH]:.2f} tokens (q10/50/90 {q[0]:g}/{q[1]:g}/{q[2]:g})"
    if not math.isnan(content[names.SUMMARY_HOLDS_CUED]):
        line += (f"; hold the cued fact {content[names.SUMMARY_HOLDS_CUED]:.3f}, "
                 f"another {content[names.SUMMARY_HOLDS_UNCUED]:.3f}")
    return [line]


def format_stats(stats: dict[str, Any], title: str) -> str:
    """A short human-readable report."""
    dist = ", ".join(f"{k}:{v}" for k, v in stats["segments_distribution"].items())
    share = stats["time_share"]
    s = stats
    lines = [
        title,
        f"  success          {s['success_rate']:.3f} ± {s['success_se']:.3f}  ({s['rollouts']} rollouts, "
        f"{s['rollouts'] // s['group_size']} prompts; SE over prompts)",
        f"  segments         mean {s['mean_segments']:.2f}  distribution {{{dist}}}",
        f"  compaction rate  {s['compaction_rate']:.3f}  (mean {s['mean_compactions']:.2f} per rollout)",
        f"  overlong rate    {s['overlong_rate']:.3f}  {s['overlong_reasons'] or ''}",
        f"  corr(segments, reward)  {s['corr_segments_reward']:+.3f} overall; within groups of "
        f"G={s['group_size']}: {s['within_group']['corr']:+.3f}, SD of segments {s['within_group']['segments_sd']:.2f}",
        *_route_lines(s["routes"]),
        f"  working context  mean {s['working_context_mean']:.1f}  max {s['working_context_max']}"
        f"  (W={s['window']}, L={s['threshold']})",
        f"  effective horizon  L x (S+1) = {s['effective_horizon']} tokens; mean steps {s['mean_steps']:.1f}",
        *_summary_lines(s["summaries"]),
        f"  throughput       {s['tokens_per_s']:,.0f} tokens/s, {s['rollouts_per_s']:,.1f} rollouts/s"
        + (
            f"  (env {share['env']:.0%}, agent {share['agent']:.0%}, harness {share['harness']:.0%})"
            if share
            else ""
        ),
    ]
    return "\n".join(lines)


def _route_lines(routes: dict[str, Any]) -> list[str]:
    """One line per first action, when the rollouts took more than one."""
    if len(routes) < 2:
        return []
    return [f"  first action {tok:>3}  share {r['share']:.2f}  success {r['success_rate']:.3f}  segments "
            f"{r['mean_segments']:.2f}  in-group SD of segments {r['within_group']['segments_sd']:.2f}, "
            f"corr {r['within_group']['corr']:+.3f}" for tok, r in routes.items()]


AgentFactory = Callable[[Any, int], Agent]
"""Builds the agent of one batch: (its vector env, the batch's first instance seed) -> an agent."""


def inspect_preset(
    preset: str,
    agent: str = "scripted",
    *,
    episodes: int = 512,
    batch: int = 256,
    seed: int = 0,
    quality: float | None = None,
    group_size: int = 8,
    harness: dict[str, Any] | None = None,
    task: dict[str, Any] | None = None,
    progress: Any = None,
    agent_factory: AgentFactory | None = None,
) -> dict[str, Any]:
    """Run ``episodes`` rollouts of a preset under a reference agent and a harness setting.

    ``harness`` and ``task`` override the preset's fields. Batches of ``batch`` envs run one after
    another with disjoint seeds; each batch plays prompts in groups of ``group_size`` rollouts (GRPO's
    G), so the within-group statistics see what a group-relative estimator would. ``episodes`` and
    ``batch`` must be multiples of ``group_size``. ``agent_factory`` plays instead of the reference agent
    ``agent`` (then only a label), e.g. a trained policy (``simlab inspect --checkpoint``). ``quality=None``:
    the scripted agent's default."""
    import gymnasium

    from simlab import tasks  # noqa: F401  (registers the envs)
    from simlab.harness.agents import AGENTS
    from simlab.harness.config import HarnessConfig
    from simlab.harness.loop import run_rollouts
    from simlab.rules import BATCH_MAX, COUNT_MAX, Seed, check_value, ints
    from simlab.tasks.presets import get_preset

    p, quality = get_preset(preset, "task"), SCRIPTED_QUALITY if quality is None else quality
    if agent_factory is None:
        AGENTS.canonical(agent, "agent")
    check_value("group_size", group_size, ints(1, BATCH_MAX))
    check_value("seed", seed, Seed)
    for name, value, most in (("episodes", episodes, COUNT_MAX), ("batch", batch, BATCH_MAX)):
        check_value(name, value, ints(group_size, most))
        if value % group_size:
            raise ConfigError.invalid(name, value, f"choose a multiple of group_size={group_size}")
    HarnessConfig.check_fields(harness or {})
    cfg = HarnessConfig(**{**p.harness, **(harness or {})})
    task_cfg = p.task.replace(**(task or {}))
    batches = []
    done = 0
    while done < episodes:
        n = min(batch, episodes - done)
        env = gymnasium.make_vec(
            p.env_id, num_envs=n, vectorization_mode="vector_entry_point", config=task_cfg
        )
        first = seed + done // group_size
        actor = agent if agent_factory is None else agent_factory(env, first)
        batches.append(run_rollouts(env, actor, cfg, seed=first, group_size=group_size, quality=quality,
                                    progress=progress))
        env.close()
        done += n
    out = rollout_stats(batches)
    out.update(task=preset, agent=agent, trigger=cfg.trigger, quality=quality)
    return out
