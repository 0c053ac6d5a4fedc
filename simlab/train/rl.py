"""RL from the base checkpoint: :class:`Trainer` runs one step (rollouts, credit, the clipped policy update,
the critic, health metrics).

The loss of one update is ``(w * per_token_loss).sum()`` over the whole rollout batch, exactly as the
normaliser defines it; mini-batches only bound memory, their gradients are accumulated into one
optimiser step per epoch. Which segments share a mini-batch therefore changes nothing but float
rounding, so the update groups segments of similar length and cuts each mini-batch to its longest
segment (:func:`~simlab.train.tokens.length_buckets`): no token slot is spent on padding rows, and a
mini-batch small enough for a core's cache runs faster per token. ``train.length_buckets = false`` keeps
the update before issue 21 (random segments, padded to ``minibatch_segments`` rows of the batch's longest).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch
from torch import Tensor

from simlab import credit, names
from simlab.config import RunConfig
from simlab.credit import SegmentBatch
from simlab.harness import RolloutBatch
from simlab.harness.config import draw_fracs
from simlab.harness.phases import phase_table
from simlab.harness.protocol import Phase
from simlab.policy.agent import PolicyAgent
from simlab.policy.model import Policy, critic_from
from simlab.train.rollouts import collect, group_metrics, rollout_metrics
from simlab.train.tokens import (
    MiniBatch,
    TokenBatch,
    check_finite,
    from_token_grid,
    keys_attended,
    length_buckets,
    outside_phases,
    padded_minibatches,
    score,
    score_in,
    to_token_grid,
)
from simlab.update import (
    OPTIMISERS,
    Optimiser,
    clipped_policy_loss,
    explained_variance,
    lr_factor,
    value_loss,
    weighted_entropy,
)


@dataclass
class PerTokenStats:
    """Loss-weighted means of per-token diagnostics over an update's mini-batches.

    Each mini-batch reports its own weighted mean; weighting those by the mini-batch's loss weight
    gives the whole batch's, however the batch was cut. A mini-batch with no weight (only masked or
    dummy segments) has nothing to say. The values stay on the device as 0-d tensors until :meth:`means`
    reads them all at once (one device sync per update, not one per mini-batch) and sums them in Python
    floats, in mini-batch order.
    """

    KEYS: ClassVar[tuple[str, ...]] = (names.LOSS_CLIP_FRACTION, names.LOSS_APPROX_KL, names.LOSS_ENTROPY)
    rows: list[list[Tensor]] = field(default_factory=list)
    """Per mini-batch: its loss weight, then its value of each of :attr:`KEYS`."""

    def add(self, mass: Tensor, values: dict[str, Tensor]) -> None:
        """Add one mini-batch's weighted means, weighted by its loss weight ``mass``."""
        self.rows.append([mass, *(values[k] for k in self.KEYS)])

    def means(self) -> dict[str, float]:
        """The batch's clip fraction, approximate KL and entropy (NaN when no mini-batch had weight)."""
        # float64 holds each float32 value exactly: the sums below are those of the values' Python floats
        table = torch.stack([torch.stack([v.double() for v in row]) for row in self.rows]).tolist() if self.rows else []
        mass, sums = 0.0, dict.fromkeys(self.KEYS, 0.0)
        for weight, *values in table:
            if weight <= 0:
                continue
            mass += weight
            for key, value in zip(self.KEYS, values, strict=True):
                sums[key] += weight * value
        return {k: sums[k] / mass if mass else math.nan for k in self.KEYS}


class Trainer:
    """RL from the base checkpoint with the run's recipe."""

    def __init__(self, cfg: RunConfig, policy: Policy, base_path: Path | None = None) -> None:
        self.cfg = cfg
        self.base_path = base_path
        self.policy = policy
        self.device = policy.device
        t = cfg.train
        self.opt = OPTIMISERS.get(t.optimizer)(policy.parameters(), t.lr)
        self.schedule_used = 0.0
        """Units (rollouts or rows, ``train.schedule_unit``) the policy has been updated on so far."""
        self.critic: Policy | None = None
        self.critic_opt: Optimiser | None = None
        if t.critic == "separate":
            self.critic = critic_from(policy)  # CompactionRL: critic initialised from the policy checkpoint
            # the critic keeps Adam whatever train.optimizer says: under SGD its value regression diverged
            # (issue 29's calibration: pre-training value loss 1.5 -> 3e4 in three steps at lr 0.3 x 1.5)
            self.critic_opt = OPTIMISERS.get("adam")(self.critic.parameters(), t.lr * t.critic_lr_scale)
        elif t.critic == "head":
            self.critic = policy
        # rollouts sample from a stream of their own, so that how the update cuts its mini-batches
        # (random draws or none) never changes what the policy plays
        self.sample_gen = torch.Generator(self.device).manual_seed(cfg.seed)
        self.gen = torch.Generator().manual_seed(int(np.random.default_rng([cfg.seed, 1]).integers(2**62)))
        self.trend: list[tuple[float, float]] = []
        """Per training step: segments per rollout and the compacted rollouts' success (the stall signal)."""

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
            batch = credit.with_cost(batch, t.cost, coef=t.cost_coef, row_context=keys_attended(batch, tb),
                                     on=t.cost_on)
        est = credit.estimate(batch, t.estimator, **t.estimator_options())
        adv = est.advantages
        if t.whiten:
            adv = credit.whiten(adv, batch.token_mask)
        options = {"overlong_mask": t.overlong_mask, "row_weight": t.row_weight}
        masked = tuple(phase for phase, off in ((Phase.SUMMARY, t.summary_loss != "train"),
                                                (Phase.ANSWER, t.answer_loss == "mask")) if off)
        token_mask = outside_phases(batch, tb, masked) if masked else None
        if token_mask is not None and t.summary_loss == "separate":
            weights = credit.separated_loss_weights(batch, t.normaliser, summary=batch.token_mask & ~token_mask,
                                                    summary_weight=t.summary_weight, **options)
        else:
            weights = credit.loss_weights(batch, t.normaliser, token_mask=token_mask, **options)
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
        totals, norms = [], []
        per_token = PerTokenStats()
        self.policy.train()
        for epoch in range(t.epochs):
            self.opt.zero_grad(set_to_none=True)
            losses = []
            for mb in self.minibatches(tb):
                sc = score(self.policy, tb.take(mb), table, t.temperature)
                if reuse and epoch == 0:
                    old[mb.rows, : mb.width] = sc.logprobs.detach()
                w = mb.of(grids["weights"])
                loss, st = clipped_policy_loss(sc.logprobs, mb.of(old), mb.of(grids["advantages"]), w,
                                               eps_low=t.eps_low, eps_high=t.eps_high, ratio=t.ratio)
                if t.entropy_coef:
                    loss = loss - t.entropy_coef * (w * sc.entropy).sum()
                torch.autograd.backward(loss)
                losses.append(loss.detach())
                per_token.add(w.sum(), {names.LOSS_CLIP_FRACTION: st.clip_fraction, names.LOSS_APPROX_KL: st.approx_kl,
                                        names.LOSS_ENTROPY: weighted_entropy(sc.entropy.detach(), w)})
            check_finite("policy loss", losses, step)  # once per epoch, before the optimiser step
            norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), t.max_grad_norm)
            check_finite("policy gradient norm", norm, step)
            self.opt.step()
            totals.append(sum(losses, torch.zeros((), device=self.device)))
            norms.append(norm)
        return {names.LOSS_POLICY: float(np.mean(torch.stack(totals).tolist())),
                names.LOSS_GRAD_NORM: float(np.mean(torch.stack(norms).tolist())), **per_token.means()}

    def update_critic(self, tb: TokenBatch, table: Tensor, grids: dict[str, Tensor], step: int) -> dict[str, float]:
        """``value_updates`` critic regressions on the value targets; the last value loss."""
        assert self.critic is not None
        t = self.cfg.train
        opt = self.critic_opt if self.critic_opt is not None else self.opt
        self.critic.train()
        last = None
        for _ in range(t.value_updates):
            opt.zero_grad(set_to_none=True)
            losses = []
            for mb in self.minibatches(tb):
                sc = score(self.critic, tb.take(mb), table, t.temperature)
                assert sc.values is not None
                loss = value_loss(sc.values, mb.of(grids["targets"]), mb.of(grids["value_weights"]))
                torch.autograd.backward(loss)
                losses.append(loss.detach())
            check_finite("value loss", losses, step)  # once per update, before the optimiser step
            torch.nn.utils.clip_grad_norm_(self.critic.parameters(), t.max_grad_norm)
            opt.step()
            last = sum(losses, torch.zeros((), device=self.device))
        return {names.LOSS_VALUE: math.nan if last is None else float(last)}

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
        metrics.update(group_metrics(rb, names.TRAIN))
        metrics.update(self.health(batch, adv))
        if policy_update:
            metrics[names.health(names.STALL)] = self.stall(metrics)
        optimised = int(batch.seg_tokens.sum())
        # the real rows' tokens (not "token != PAD": a variable-length summary's end token has PAD's id)
        passes = self.update_passes(policy_update, "targets" in grids)
        update_tokens = int(tb.lengths[: len(rb.segments)].sum()) * passes
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

    def stall(self, metrics: dict[str, float]) -> float:
        """The stall signal (``credit.health.stall``) over the training steps so far, this one included."""
        self.trend.append((metrics[names.metric(names.TRAIN, names.SEGMENTS_MEAN)],
                           metrics[names.TRAIN_SUMMARISED_SUCCESS]))
        return credit.health.stall(*np.asarray(self.trend).T)

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
