"""The trainer: base model (behaviour cloning), RL by every recipe, evaluation, checkpoints.

Data flow per RL step: task (vector env) -> harness (``run_rollouts`` with a :class:`PolicyAgent`) ->
SegmentBatch -> credit (``advantages``, ``loss_weights``, ``value_targets``) -> update (clipped loss,
critic) -> metrics (a :class:`MetricSink`). Every advantage and loss weight comes from the credit layer;
this module only moves tensors between it and the model.

The loss of one update is ``(w * per_token_loss).sum()`` over the whole rollout batch, exactly as the
normaliser defines it; mini-batches only bound memory, their gradients are accumulated into one
optimiser step per epoch. Which segments share a mini-batch therefore changes nothing but float
rounding, so the update groups segments of similar length and cuts each mini-batch to its longest
segment (:func:`length_buckets`): no token slot is spent on padding rows, and a mini-batch small
enough for a core's cache runs faster per token. ``train.length_buckets = false`` keeps the update
before issue 21 (random segments, padded to ``minibatch_segments`` rows of the batch's longest).
"""

from __future__ import annotations

import contextlib
import math
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import polars as pl
import torch
from torch import Tensor

from simlab import (
    credit,
    names,
    stores,
    tasks,  # noqa: F401  (registers the simlab/ envs)
)
from simlab.config import RunConfig
from simlab.credit import SegmentBatch
from simlab.errors import ConfigError, TrainingDiverged
from simlab.harness import HarnessConfig, RolloutBatch, run_rollouts
from simlab.harness.config import draw_fracs
from simlab.harness.phases import phase_table
from simlab.harness.protocol import Phase
from simlab.policy.agent import PolicyAgent
from simlab.policy.checkpoint import load_checkpoint, save_checkpoint
from simlab.policy.decode import TokenScores, score_tokens
from simlab.policy.device import default_device
from simlab.policy.model import Policy, critic_from
from simlab.schema import plain
from simlab.sinks import MetricSink
from simlab.stores import file_lock
from simlab.summarisers import summariser_for
from simlab.update import clipped_policy_loss, explained_variance, lr_factor, value_loss, weighted_entropy


def device_of(cfg: RunConfig) -> torch.device:
    if cfg.device == "auto":
        return default_device()
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError.invalid("device", "cuda", "this machine has no CUDA device; choose 'auto' or 'cpu'")
    return torch.device(cfg.device)


def make_env(cfg: RunConfig, num_envs: int, task: Any = None) -> Any:
    """``num_envs`` envs of the run's task (or of ``task``, a config of the same env)."""
    return gymnasium.make_vec(cfg.env_id, num_envs=num_envs, vectorization_mode="vector_entry_point",
                              config=cfg.task if task is None else task)


def checkpoint_meta(cfg: RunConfig, harness: HarnessConfig | None = None) -> dict[str, Any]:
    """What a checkpoint must remember: the summarisation instruction's version and the trigger settings,
    and the whole harness and task it was trained under (``simlab inspect --checkpoint`` replays them)."""
    h = harness or cfg.harness
    return {"v_sum": h.v_sum, "trigger": h.trigger, "frac": h.frac, "t_comp": h.t_comp, "window": h.window,
            "summary_tokens": h.summary_tokens, "preset": cfg.preset, "harness": plain(h), "task": plain(cfg.task)}


# ---------------------------------------------------------------------------------------------- tensors
@dataclass
class TokenBatch:
    """A rollout batch as right-padded (S, T) tensors aligned with the harness's segment rows."""

    tokens: Tensor
    optimised: Tensor
    phase: Tensor
    lengths: Tensor
    """(S,) tokens of each row before its padding."""

    @classmethod
    def from_rollouts(cls, rb: RolloutBatch, device: torch.device) -> TokenBatch:
        arrays = rb.padded()
        return cls(
            tokens=torch.from_numpy(arrays["tokens"]).to(device),
            optimised=torch.from_numpy(arrays["optimised_mask"]).to(device),
            phase=torch.from_numpy(arrays["phase"].astype(np.int64)).to(device),
            lengths=torch.from_numpy(arrays["attention_mask"].sum(axis=1)),
        )

    def pad_rows(self, rows: int) -> TokenBatch:
        """Append dummy rows (one PAD token, nothing optimised) up to ``rows`` rows."""
        extra = rows - self.tokens.shape[0]
        if extra <= 0:
            return self
        T = self.tokens.shape[1]
        z = torch.zeros(extra, T, dtype=self.tokens.dtype, device=self.tokens.device)
        return TokenBatch(torch.cat([self.tokens, z]), torch.cat([self.optimised, z.bool()]),
                          torch.cat([self.phase, z]), torch.cat([self.lengths, torch.ones(extra, dtype=torch.long)]))

    def take(self, mb: MiniBatch) -> TokenBatch:
        return TokenBatch(mb.of(self.tokens), mb.of(self.optimised), mb.of(self.phase), self.lengths[mb.rows])


@dataclass(frozen=True)
class MiniBatch:
    """Some rows of a :class:`TokenBatch`, cut to ``width`` positions (the longest of those rows)."""

    rows: Tensor
    """(R,) row indices into the batch."""
    width: int

    def of(self, grid: Tensor) -> Tensor:
        """The (R, width) part of a batch-shaped (S, T) grid: a copy, so writing to it changes nothing."""
        return grid[self.rows, : self.width]


def length_buckets(lengths: Tensor, *, max_rows: int, max_tokens: int) -> list[MiniBatch]:
    """Mini-batches of rows of similar length, each at most ``max_rows`` rows and, unless
    ``max_tokens`` is 0, at most ``max_tokens`` token slots (rows x the longest of them).

    Rows go shortest first and fill a mini-batch until the next would break a bound, so a
    mini-batch's padding is only the spread of lengths inside it. A batch that fits in one
    mini-batch keeps its rows in order at their full width.
    """
    n, width = len(lengths), int(lengths.max())
    if n <= max_rows and (not max_tokens or n * width <= max_tokens):
        return [MiniBatch(torch.arange(n), width)]
    order = torch.argsort(lengths, stable=True)
    size = lengths[order].tolist()
    out, start = [], 0
    for i in range(1, n + 1):
        full = i == n or i - start == max_rows or (max_tokens and (i - start + 1) * size[i] > max_tokens)
        if full:
            out.append(MiniBatch(order[start:i], size[i - 1]))
            start = i
    return out


def padded_minibatches(num_rows: int, width: int, size: int, generator: torch.Generator) -> list[MiniBatch]:
    """Random mini-batches of ``size`` rows at the batch's full ``width`` (the update before issue 21;
    the batch was padded with dummy rows to a multiple of ``size``)."""
    order = torch.randperm(num_rows, generator=generator)
    return [MiniBatch(order[start : start + size], width) for start in range(0, num_rows, size)]


def to_token_grid(grid: np.ndarray, batch: SegmentBatch, tb: TokenBatch) -> Tensor:
    """Credit-layer (S, max_optimised) values -> (S, T) at each segment's optimised token positions.

    Both sides list a row's optimised tokens in generation order, so row-major boolean indexing pairs
    the k-th optimised token of a row with column k of the credit grid.
    """
    out = torch.zeros(tb.tokens.shape, dtype=torch.float32, device=tb.tokens.device)
    real = torch.from_numpy(grid[batch.token_mask]).to(out.device, torch.float32)
    rows = batch.num_segments
    out[:rows][tb.optimised[:rows]] = real
    return out


def from_token_grid(values: Tensor, batch: SegmentBatch, tb: TokenBatch) -> np.ndarray:
    """The inverse of :func:`to_token_grid`: (S, T) per-token values -> the credit layer's (S, max_optimised)."""
    grid = np.zeros(batch.shape)
    rows = batch.num_segments
    grid[batch.token_mask] = values[:rows][tb.optimised[:rows]].detach().cpu().double().numpy()
    return grid


def not_summary(batch: SegmentBatch, tb: TokenBatch) -> np.ndarray:
    """(S, max_optimised) True on the batch's optimised tokens that are not summary tokens."""
    summary = from_token_grid((tb.phase == int(Phase.SUMMARY)).float(), batch, tb) > 0.5
    return batch.token_mask & ~summary


def keys_attended(batch: SegmentBatch, tb: TokenBatch) -> np.ndarray:
    """(S,) per row, the context each of its optimised tokens was generated from, summed (the keys read)."""
    rows = batch.num_segments
    positions = torch.arange(tb.tokens.shape[1], device=tb.tokens.device)
    return (tb.optimised[:rows] * positions).sum(dim=1).cpu().double().numpy()


def score(policy: Policy, tb: TokenBatch, table: Tensor, temperature: float) -> Any:
    allowed = table[tb.phase]  # (S, T, V)
    return score_tokens(policy, tb.tokens, allowed, tb.optimised, temperature=temperature)


@torch.no_grad()
def score_in(batches: list[MiniBatch], policy: Policy, tb: TokenBatch, table: Tensor,
             temperature: float) -> TokenScores:
    """:func:`score` of the whole batch without gradients, computed mini-batch by mini-batch."""
    S, T = tb.tokens.shape
    grids = [torch.zeros(S, T, device=tb.tokens.device) for _ in range(3)]
    has_values = True
    for mb in batches:
        sc = score(policy, tb.take(mb), table, temperature)
        has_values = sc.values is not None
        for grid, part in zip(grids, (sc.logprobs, sc.entropy, sc.values), strict=True):
            if part is not None:
                grid[mb.rows, : mb.width] = part
    return TokenScores(grids[0], grids[1], grids[2] if has_values else None)


def check_finite(name: str, value: Tensor, step: int) -> None:
    if not bool(torch.isfinite(value).all()):
        raise TrainingDiverged(f"{name} is {float(value)} at step {step}; stopping before the optimiser step")


# ---------------------------------------------------------------------------------------------- rollouts
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
) -> tuple[RolloutBatch, Any, PolicyAgent | None]:
    """Run ``prompts x group_size`` rollouts with the policy (or a reference ``teacher``, on the task
    ``base.teach`` names: its rollouts are demonstrations).

    Returns the batch, the env (for its phase masks) and the policy agent (its counters say what the
    trunk processed: tokens and attended keys), or None for a teacher.
    """
    n = prompts * group_size
    env = make_env(cfg, n, cfg.base_task() if teacher is not None else None)  # a teacher plays base.teach
    frozen = summariser_for(harness.summariser)(cfg, env, seed=seed + 7, base_path=base_path)
    if teacher is not None:
        rb = run_rollouts(env, teacher, harness, seed=seed, group_size=group_size, summariser=frozen,
                          quality=cfg.base.quality)
        return rb, env, None
    assert policy is not None
    policy.eval()
    agent = PolicyAgent(policy, n, temperature=cfg.train.temperature, greedy=greedy, generator=generator)
    rb = run_rollouts(env, agent, harness, seed=seed, group_size=group_size, summariser=frozen, fracs=fracs)
    return rb, env, agent


def rollout_metrics(rb: RolloutBatch, prefix: str) -> dict[str, float]:
    rewards = np.array([r.reward for r in rb.rollouts])
    finished = np.array([r.finished for r in rb.rollouts])
    segments = rb.batch.segments_per_rollout
    compacted = segments > 1
    written = sum(r.summaries for r in rb.rollouts)
    held = sum(r.summaries_with_answer for r in rb.rollouts)
    out = {
        names.SUCCESS: float(np.mean(rewards >= 1.0)),
        names.RETURN: float(rewards.mean()),
        names.OVERLONG_RATE: float(1.0 - finished.mean()),
        names.SEGMENTS_MEAN: float(segments.mean()),
        names.COMPACTION_RATE: float(compacted.mean()),
        names.STEPS: float(np.mean([r.steps for r in rb.rollouts])),
        names.SUMMARISED_SUCCESS: float(np.mean(rewards[compacted] >= 1.0)) if compacted.any() else math.nan,
        names.SUMMARY_HOLDS_ANSWER: held / written if written else math.nan,
    }
    return {names.metric(prefix, k): v for k, v in out.items()}


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
    """One row per held-out episode of an evaluation (:data:`simlab.names.EPISODE_COLUMNS`).

    Episode j of an evaluation plays instance ``first_instance + j`` (one rollout per prompt), so the
    arms of a seed and the evaluations of a run line up by instance.
    """
    rewards = np.array([r.reward for r in rb.rollouts], dtype=np.float32)
    n = rewards.size
    return pl.DataFrame({
        "step": np.full(n, step, dtype=np.int32),
        "evaluation": [evaluation] * n,
        "instance": np.arange(first_instance, first_instance + n, dtype=np.int64),
        "success": (rewards >= 1.0).astype(np.int8),
        "reward": rewards,
        "segments": rb.batch.segments_per_rollout.astype(np.int16),
        "tokens": np.array([r.tokens for r in rb.rollouts], dtype=np.int32),
        "overlong": np.array([not r.finished for r in rb.rollouts], dtype=np.bool_),
    }).select(names.EPISODE_COLUMNS)


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


# ---------------------------------------------------------------------------------------------- base model
def behaviour_clone(cfg: RunConfig, policy: Policy, sink: MetricSink | None = None, progress: Any = None) -> None:
    """Supervised learning on a reference agent's generated tokens (actions, summaries, answers, COMPACT)."""
    harness = base_harness(cfg)
    opt = torch.optim.Adam(policy.parameters(), lr=cfg.base.lr)
    rng = np.random.default_rng(cfg.base_seed + 12345)
    for step in range(cfg.base.steps):
        seed = int(rng.integers(0, cfg.train_seed_limit - cfg.base.episodes))
        rb, env, _ = collect(cfg, None, harness=harness, prompts=cfg.base.episodes, group_size=1, seed=seed,
                             teacher=cfg.base.teacher)
        table = torch.from_numpy(phase_table(env, harness.trigger)).to(policy.device)
        tb = TokenBatch.from_rollouts(rb, policy.device)
        policy.train()
        loss = imitation_step(policy, opt, tb, table, cfg.base.minibatch_tokens, step)
        if sink is not None:
            metrics = {names.BASE_LOSS: float(loss.detach()), **rollout_metrics(rb, names.BASE_TEACHER)}
            sink.log_metrics(metrics, step=step)
        if progress is not None:
            progress(1)


def imitation_step(policy: Policy, opt: torch.optim.Optimizer, tb: TokenBatch, table: Tensor, max_tokens: int,
                   step: int) -> Tensor:
    """One optimiser step on the mean negative log-likelihood of the batch's optimised tokens.

    The gradient of the whole batch, accumulated over length buckets of at most ``max_tokens`` token
    slots (0: the batch in one padded pass); returns the loss.
    """
    count = tb.optimised.sum().clamp_min(1)
    opt.zero_grad(set_to_none=True)
    total = torch.zeros((), device=tb.tokens.device)
    for mb in length_buckets(tb.lengths, max_rows=tb.tokens.shape[0], max_tokens=max_tokens):
        loss = -score(policy, tb.take(mb), table, 1.0).logprobs.sum() / count
        check_finite("behaviour-cloning loss", loss, step)
        loss.backward()
        total = total + loss.detach()
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    opt.step()
    return total


def base_harness(cfg: RunConfig) -> HarnessConfig:
    """Where demonstrations are collected: the preset's harness with the run's context geometry.

    The geometry (window, summary length, caps, v_sum) must match the run, since the policy's context
    and summary sizes follow it; the trigger is ``policy`` so the teacher also demonstrates when to emit
    COMPACT. Recipes that differ only in trigger, tail, discard or threshold share one base model.
    """
    return HarnessConfig().replace(**cfg.base_harness_settings())


def base_path(cfg: RunConfig, store: Path) -> Path:
    """Where ``cfg``'s base checkpoint is cached under the store folder."""
    return Path(store) / "base" / f"{cfg.preset}-{cfg.base_key()}.pt"


def base_checkpoint(cfg: RunConfig, store: Path, sink: MetricSink | None = None, progress: Any = None) -> Path:
    """The cached base checkpoint for ``cfg`` (built once per task preset and base config)."""
    path = base_path(cfg, store)
    if cfg.base.cache and path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path, ".lock"):
        if cfg.base.cache and path.exists():  # another worker built it while we waited
            return path
        torch.manual_seed(cfg.base_seed)
        policy = Policy(replace(cfg.policy, value_head=False)).to(device_of(cfg))
        behaviour_clone(cfg, policy, sink, progress)
        save_checkpoint(path, policy, meta=checkpoint_meta(cfg))
    return path


# ---------------------------------------------------------------------------------------------- RL
@dataclass
class PerTokenStats:
    """Loss-weighted means of per-token diagnostics over an update's mini-batches.

    Each mini-batch reports its own weighted mean; weighting those by the mini-batch's loss weight
    gives the whole batch's, however the batch was cut. A mini-batch with no weight (only masked or
    dummy segments) has nothing to say.
    """

    sums: dict[str, float] = field(default_factory=dict)
    mass: float = 0.0

    def add(self, mass: float, values: dict[str, float]) -> None:
        if mass <= 0:
            return
        self.mass += mass
        for key, value in values.items():
            self.sums[key] = self.sums.get(key, 0.0) + mass * value

    def means(self) -> dict[str, float]:
        keys = (names.LOSS_CLIP_FRACTION, names.LOSS_APPROX_KL, names.LOSS_ENTROPY)
        return {k: self.sums[k] / self.mass if self.mass else math.nan for k in keys}


class Trainer:
    """RL from the base checkpoint with the run's recipe."""

    def __init__(self, cfg: RunConfig, policy: Policy, base_path: Path | None = None) -> None:
        self.cfg = cfg
        self.base_path = base_path
        self.policy = policy
        self.device = policy.device
        t = cfg.train
        self.opt = torch.optim.Adam(policy.parameters(), lr=t.lr)
        self.schedule_used = 0.0
        """Units (rollouts or rows, ``train.schedule_unit``) the policy has been updated on so far."""
        self.critic: Policy | None = None
        self.critic_opt: torch.optim.Optimizer | None = None
        if t.critic == "separate":
            self.critic = critic_from(policy)  # CompactionRL: critic initialised from the policy checkpoint
            self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=t.lr * t.critic_lr_scale)
        elif t.critic == "head":
            self.critic = policy
        # rollouts sample from a stream of their own, so that how the update cuts its mini-batches
        # (random draws or none) never changes what the policy plays
        self.sample_gen = torch.Generator(self.device).manual_seed(cfg.seed)
        self.gen = torch.Generator().manual_seed(int(np.random.default_rng([cfg.seed, 1]).integers(2**62)))

    # ------------------------------------------------------------------ one step
    def prompt_seed(self, step: int, *, pretrain: bool = False) -> int:
        """First instance seed of a step's prompts: a pure function of (run seed, step, phase).

        Arms of a sweep that share a seed therefore train on the same prompt stream, whatever else
        (value pretraining, extra draws) they do; pretraining steps draw from a stream of their own.
        """
        rng = np.random.default_rng([self.cfg.seed, step, int(pretrain)])
        return int(rng.integers(0, self.cfg.train_seed_limit - self.cfg.train.prompts))

    def rollout(self, step: int, *, pretrain: bool = False) -> tuple[RolloutBatch, Any, PolicyAgent | None]:
        """Roll out one step's prompts x G with the policy, on the step's prompt stream."""
        t = self.cfg.train
        seed = self.prompt_seed(step, pretrain=pretrain)
        fracs = None
        if t.threshold_draw != "fixed":  # training thresholds drawn per group or per rollout
            fracs = draw_fracs(self.cfg.harness.frac, draw=t.threshold_draw, spread=t.frac_spread, seed=seed,
                               num_envs=t.prompts * t.group_size, group_size=t.group_size)
        return collect(self.cfg, self.policy, harness=self.cfg.harness, prompts=t.prompts,
                       group_size=t.group_size, seed=seed, generator=self.sample_gen, base_path=self.base_path,
                       fracs=fracs)

    def minibatches(self, tb: TokenBatch) -> list[MiniBatch]:
        """One epoch's mini-batches: length buckets, or random padded ones (``train.length_buckets``)."""
        t = self.cfg.train
        if t.length_buckets:
            return length_buckets(tb.lengths, max_rows=t.minibatch_segments, max_tokens=t.minibatch_tokens)
        return padded_minibatches(tb.tokens.shape[0], tb.tokens.shape[1], t.minibatch_segments, self.gen)

    def scoring_batches(self, tb: TokenBatch) -> list[MiniBatch]:
        """How a pass without gradients covers the batch: the length buckets, or the whole padded batch."""
        if self.cfg.train.length_buckets:
            return self.minibatches(tb)
        return [MiniBatch(torch.arange(tb.tokens.shape[0]), tb.tokens.shape[1])]

    def critic_values(self, tb: TokenBatch, table: Tensor) -> Tensor | None:
        """The critic's values on the batch's tokens, or ``None`` without a critic."""
        if self.critic is None:
            return None
        self.critic.eval()
        return score_in(self.scoring_batches(tb), self.critic, tb, table, self.cfg.train.temperature).values

    def credit(
        self, rb: RolloutBatch, tb: TokenBatch, values: Tensor | None
    ) -> tuple[SegmentBatch, dict[str, Any], np.ndarray]:
        """Advantages, loss weights and value targets from the credit layer, on the token grid.

        Also returns the estimator's raw (unwhitened) advantages, which the health metrics compare with
        the concatenated-GAE reference.
        """
        t = self.cfg.train
        batch = rb.batch
        if values is not None:
            batch = batch.with_values(from_token_grid(values, batch, tb))
        if t.cost != "none":  # the estimator sees R - coef * sum of the segments' costs
            batch = credit.with_cost(batch, t.cost, coef=t.cost_coef, row_context=keys_attended(batch, tb))
        est = credit.estimate(batch, t.estimator, **t.estimator_options())
        adv = est.advantages
        if t.whiten:
            adv = credit.whiten(adv, batch.token_mask)
        token_mask = not_summary(batch, tb) if t.summary_loss == "mask" else None
        weights = credit.loss_weights(batch, t.normaliser, overlong_mask=t.overlong_mask, row_weight=t.row_weight,
                                      token_mask=token_mask)
        grids = {"advantages": to_token_grid(adv, batch, tb), "weights": to_token_grid(weights, batch, tb)}
        if est.value_targets is not None:
            grids["targets"] = to_token_grid(est.value_targets, batch, tb)
            # the critic regresses on every optimised token, token-averaged, masked or not
            grids["value_weights"] = to_token_grid(credit.loss_weights(batch, "token"), batch, tb)
        return batch, grids, est.advantages

    def update_policy(self, tb: TokenBatch, table: Tensor, grids: dict[str, Tensor], step: int) -> dict[str, float]:
        """The clipped policy update (``epochs`` passes in mini-batches); its loss diagnostics."""
        t = self.cfg.train
        reuse = self.first_epoch_scores_old()
        if reuse:  # filled by the first epoch, before its optimiser step
            old = torch.zeros(tb.tokens.shape, device=self.device)
        else:  # old log-probs under the same masks the update uses (as verl recomputes them)
            self.policy.eval()
            old = score_in(self.scoring_batches(tb), self.policy, tb, table, t.temperature).logprobs
        stats: dict[str, list[float]] = {names.LOSS_POLICY: [], names.LOSS_GRAD_NORM: []}
        per_token = PerTokenStats()
        self.policy.train()
        for epoch in range(t.epochs):
            self.opt.zero_grad(set_to_none=True)
            total = torch.zeros((), device=self.device)
            for mb in self.minibatches(tb):
                sc = score(self.policy, tb.take(mb), table, t.temperature)
                if reuse and epoch == 0:
                    old[mb.rows, : mb.width] = sc.logprobs.detach()
                w = mb.of(grids["weights"])
                loss, st = clipped_policy_loss(sc.logprobs, mb.of(old), mb.of(grids["advantages"]), w,
                                               eps_low=t.eps_low, eps_high=t.eps_high, ratio=t.ratio)
                if t.entropy_coef:
                    loss = loss - t.entropy_coef * (w * sc.entropy).sum()
                check_finite("policy loss", loss, step)
                loss.backward()
                total = total + loss.detach()
                per_token.add(float(w.sum()), {names.LOSS_CLIP_FRACTION: st.clip_fraction,
                                               names.LOSS_APPROX_KL: st.approx_kl,
                                               names.LOSS_ENTROPY: weighted_entropy(sc.entropy.detach(), w)})
            norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), t.max_grad_norm)
            check_finite("policy gradient norm", norm, step)
            self.opt.step()
            stats[names.LOSS_POLICY].append(float(total))
            stats[names.LOSS_GRAD_NORM].append(float(norm))
        return {**{k: float(np.mean(v)) for k, v in stats.items()}, **per_token.means()}

    def update_critic(self, tb: TokenBatch, table: Tensor, grids: dict[str, Tensor], step: int) -> dict[str, float]:
        """``value_updates`` critic regressions on the value targets; the last value loss."""
        assert self.critic is not None
        t = self.cfg.train
        opt = self.critic_opt if self.critic_opt is not None else self.opt
        self.critic.train()
        last = math.nan
        for _ in range(t.value_updates):
            opt.zero_grad(set_to_none=True)
            total = torch.zeros((), device=self.device)
            for mb in self.minibatches(tb):
                sc = score(self.critic, tb.take(mb), table, t.temperature)
                assert sc.values is not None
                loss = value_loss(sc.values, mb.of(grids["targets"]), mb.of(grids["value_weights"]))
                check_finite("value loss", loss, step)
                loss.backward()
                total = total + loss.detach()
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), t.max_grad_norm)
            opt.step()
            last = float(total)
        return {names.LOSS_VALUE: last}

    def step(self, step: int, *, policy_update: bool = True) -> dict[str, float]:
        """One RL step: rollouts, credit, updates (policy unless ``policy_update`` is False, critic), metrics."""
        t = self.cfg.train
        t0 = time.perf_counter()
        rb, env, agent = self.rollout(step, pretrain=not policy_update)
        assert agent is not None
        trunk_tokens = agent.prefilled_tokens
        t1 = time.perf_counter()
        t_roll = t1 - t0  # the update's clock starts here: batching, critic values and credit are its cost
        table = torch.from_numpy(phase_table(env, self.cfg.harness.trigger)).to(self.device)
        tb = TokenBatch.from_rollouts(rb, self.device)
        if not t.length_buckets:  # every random mini-batch the same shape: dummy rows up to a multiple
            tb = tb.pad_rows(-(-tb.tokens.shape[0] // t.minibatch_segments) * t.minibatch_segments)
        values = self.critic_values(tb, table)
        batch, grids, adv = self.credit(rb, tb, values)
        metrics: dict[str, float] = {}
        if t.cost != "none":
            metrics[names.LOSS_SHAPED_RETURN] = float(batch.rewards.mean())
        if policy_update:
            metrics[names.LOSS_LR] = self.schedule_lr()
            metrics.update(self.update_policy(tb, table, grids, step))
            self.schedule_used += batch.num_rollouts if t.schedule_unit == "rollouts" else int(batch.is_real.sum())
        if "targets" in grids:
            metrics.update(self.update_critic(tb, table, grids, step))
            assert values is not None
            metrics[names.LOSS_EXPLAINED_VARIANCE] = explained_variance(values, grids["targets"], tb.optimised)
        t_update = time.perf_counter() - t1
        metrics.update(rollout_metrics(rb, names.TRAIN))
        metrics.update(self.health(batch, adv))
        optimised = int(batch.seg_tokens.sum())
        update_tokens = int(tb.tokens.ne(0).sum()) * self.update_passes(policy_update, "targets" in grids)
        metrics.update({
            names.PERF_ROLLOUT_S: t_roll, names.PERF_UPDATE_S: t_update,
            names.PERF_ENV_STEPS_PER_S: sum(r.steps for r in rb.rollouts) / max(t_roll, 1e-9),
            names.PERF_ROLLOUT_TOKENS: trunk_tokens,
            names.PERF_ROLLOUT_TOKENS_PER_S: trunk_tokens / max(t_roll, 1e-9),
            names.PERF_UPDATE_TOKENS: update_tokens,
            names.PERF_UPDATE_TOKENS_PER_S: update_tokens / max(t_update, 1e-9),
            names.PERF_OPTIMISED_TOKENS: optimised,
        })
        return metrics

    def schedule_lr(self) -> float:
        """Set the optimisers' learning rates from the schedule's clock; returns the policy's.

        The schedule is planned over ``steps x prompts x group_size`` units: logical rollouts, which a step
        always holds that many of, or rows, of which a compacting policy's step holds more.
        """
        t = self.cfg.train
        factor = lr_factor(t.lr_schedule, self.schedule_used, max(t.steps * t.prompts * t.group_size, 1))
        for group in self.opt.param_groups:
            group["lr"] = t.lr * factor
        if self.critic_opt is not None:
            for group in self.critic_opt.param_groups:
                group["lr"] = t.lr * t.critic_lr_scale * factor
        return t.lr * factor

    def first_epoch_scores_old(self) -> bool:
        """Whether the first epoch's forward gives the old log-probs, saving a pass over the batch.

        Every mini-batch of the first epoch runs before its optimiser step, on the weights that
        played the rollout; without dropout, train mode computes what eval mode does, and a row's
        scores do not depend on the rows batched with it (bit for bit on the CPU), so the separate
        no-grad pass recomputed exactly these numbers.
        """
        return self.policy.config.dropout == 0.0

    def update_passes(self, policy_update: bool, critic_update: bool) -> int:
        """Trunk passes over the rollout batch after the rollout: critic values, old log-probs (unless
        the first epoch gives them), epochs, critic updates."""
        t = self.cfg.train
        passes = 1 if self.critic is not None else 0
        passes += (0 if self.first_epoch_scores_old() else 1) + t.epochs if policy_update else 0
        passes += t.value_updates if critic_update else 0
        return passes

    def health(self, batch: SegmentBatch, adv: np.ndarray) -> dict[str, float]:
        """The credit layer's health summary of the batch, and its advantages against the reference."""
        t = self.cfg.train
        lam_opts = {k: v for k, v in t.estimator_options().items() if k in ("alpha", "response_cap")}
        opts = credit.health.HealthOptions(normaliser=t.normaliser, overlong_mask=t.overlong_mask,
                                           row_weight=t.row_weight, gamma=t.gamma, lam=t.lam, **lam_opts)
        out = {names.health(k): v for k, v in credit.health.summary(batch, opts).items()}
        if batch.values is not None:  # a GAE run: its advantages against the concatenated reference
            out.update(credit.health.advantage_error(batch, adv, **t.estimator_options()))
        else:  # a group run: its advantages against rollout-group statistics (SUPO eq. 3)
            out.update(credit.health.group_advantage_gap(batch, adv, **t.estimator_options()))
        return out


def train(cfg: RunConfig, sink: MetricSink, *, store: Path | str | None = None, progress: bool = False,
          out_dir: Path | None = None) -> dict[str, float]:
    """Base checkpoint (cached, under ``store``; default: the local store ``<home>/mlruns``, as the CLI's),
    then ``train.steps`` RL steps with periodic evaluation.

    Returns the final evaluation metrics. Raises :class:`TrainingDiverged` on a non-finite loss; the
    last good checkpoint is left in place.
    """
    from tqdm import tqdm

    from simlab.config import flatten

    torch.manual_seed(cfg.seed)
    device = device_of(cfg)
    sink.log_params(flatten(cfg))
    t = cfg.train
    base_path = base_checkpoint(cfg, Path(store) if store is not None else stores.local_store())
    torch.manual_seed(cfg.seed)  # whether the base was built now or cached, RL starts from the same state
    policy, _ = load_checkpoint(base_path, expected_vocab_size=cfg.policy.vocab_size, device=device,
                                expected_meta={"v_sum": cfg.harness.v_sum})
    if (cfg.train.critic == "head") != (policy.value is not None):
        policy = _with_value_head(policy, cfg)
    trainer = Trainer(cfg, policy, base_path)
    bar = tqdm(total=t.value_pretrain_steps + t.steps, desc="train", disable=not progress, leave=False)
    final: dict[str, float] = {}
    outcomes: list[pl.DataFrame] = []
    with contextlib.closing(bar):
        for step in range(t.value_pretrain_steps):  # critic-only steps (CompactionRL's value pretraining)
            sink.log_metrics({names.PRETRAIN + k: v for k, v in trainer.step(step, policy_update=False).items()},
                             step=step)
            bar.update(1)
        for step in range(t.steps + 1):
            metrics: dict[str, float] = {}
            if step % cfg.eval.every == 0 or step == t.steps:
                final, episodes = evaluate(cfg, policy, base_path, final=step == t.steps, step=step)
                metrics.update(final)
                outcomes.append(episodes)
            if step < t.steps:
                metrics.update(trainer.step(step))
                bar.update(1)
            sink.log_metrics(metrics, step=step)
    log_episodes(sink, pl.concat(outcomes))
    if out_dir is not None:
        save_checkpoint(Path(out_dir) / "policy.pt", policy, meta=checkpoint_meta(cfg))
    return final


def log_episodes(sink: MetricSink, outcomes: pl.DataFrame) -> None:
    """Attach the run's per-episode outcomes (:data:`simlab.names.EPISODES_TABLE`) and tag the run with it."""
    with tempfile.TemporaryDirectory(prefix="simlab-episodes-") as tmp:
        path = Path(tmp) / Path(names.EPISODES_TABLE).name
        outcomes.write_parquet(path, compression="zstd")
        sink.log_artifact(path, str(Path(names.EPISODES_TABLE).parent))
    sink.set_tags({names.EPISODES_TABLE_TAG: names.EPISODES_TABLE})


def _with_value_head(policy: Policy, cfg: RunConfig) -> Policy:
    """The base checkpoint's trunk with (or without) a value head as the recipe asks."""
    fresh = Policy(cfg.policy).to(policy.device)
    fresh.load_state_dict(policy.state_dict(), strict=False)  # the head alone is missing or extra
    return fresh


__all__ = ["Trainer", "TrainingDiverged", "base_checkpoint", "behaviour_clone", "evaluate", "train"]
