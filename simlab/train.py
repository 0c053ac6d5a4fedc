"""The trainer: base model (behaviour cloning), RL by every recipe, evaluation, checkpoints.

Data flow per RL step: task (vector env) -> harness (``run_rollouts`` with a :class:`PolicyAgent`) ->
SegmentBatch -> credit (``advantages``, ``loss_weights``, ``value_targets``) -> update (clipped loss,
critic) -> metrics (a :class:`MetricSink`). Every advantage and loss weight comes from the credit layer;
this module only moves tensors between it and the model.

The loss of one update is ``(w * per_token_loss).sum()`` over the whole rollout batch, exactly as the
normaliser defines it; mini-batches (padded with dummy zero-weight segments) only bound memory, their
gradients are accumulated into one optimiser step per epoch.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import gymnasium
import numpy as np
import torch
from torch import Tensor

from simlab import (
    credit,
    names,
    tasks,  # noqa: F401  (registers the simlab/ envs)
)
from simlab.config import RunConfig
from simlab.credit import SegmentBatch
from simlab.errors import ConfigError, TrainingDiverged
from simlab.harness import HarnessConfig, RolloutBatch, run_rollouts
from simlab.harness.phases import phase_table
from simlab.policy.agent import PolicyAgent
from simlab.policy.checkpoint import load_checkpoint, save_checkpoint
from simlab.policy.decode import score_tokens
from simlab.policy.device import default_device
from simlab.policy.model import Policy, critic_from
from simlab.schema import plain
from simlab.sinks import MetricSink
from simlab.stores import file_lock
from simlab.summarisers import SUMMARISERS
from simlab.update import clipped_policy_loss, explained_variance, value_loss, weighted_entropy


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

    @classmethod
    def from_rollouts(cls, rb: RolloutBatch, device: torch.device) -> TokenBatch:
        arrays = rb.padded()
        return cls(
            tokens=torch.from_numpy(arrays["tokens"]).to(device),
            optimised=torch.from_numpy(arrays["optimised_mask"]).to(device),
            phase=torch.from_numpy(arrays["phase"].astype(np.int64)).to(device),
        )

    def pad_rows(self, rows: int) -> TokenBatch:
        """Append dummy rows (one PAD token, nothing optimised) up to ``rows`` rows."""
        extra = rows - self.tokens.shape[0]
        if extra <= 0:
            return self
        T = self.tokens.shape[1]
        z = torch.zeros(extra, T, dtype=self.tokens.dtype, device=self.tokens.device)
        return TokenBatch(torch.cat([self.tokens, z]), torch.cat([self.optimised, z.bool()]),
                          torch.cat([self.phase, z]))

    def rows(self, idx: Tensor) -> TokenBatch:
        return TokenBatch(self.tokens[idx], self.optimised[idx], self.phase[idx])


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


def score(policy: Policy, tb: TokenBatch, table: Tensor, temperature: float) -> Any:
    allowed = table[tb.phase]  # (S, T, V)
    return score_tokens(policy, tb.tokens, allowed, tb.optimised, temperature=temperature)


def minibatches(num_rows: int, size: int, generator: torch.Generator) -> Iterator[Tensor]:
    order = torch.randperm(num_rows, generator=generator)
    for start in range(0, num_rows, size):
        yield order[start : start + size]


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
) -> tuple[RolloutBatch, Any, PolicyAgent | None]:
    """Run ``prompts x group_size`` rollouts with the policy (or a reference ``teacher``, on the task
    ``base.teach`` names: its rollouts are demonstrations).

    Returns the batch, the env (for its phase masks) and the policy agent (its counters say what the
    trunk processed: tokens and attended keys), or None for a teacher.
    """
    n = prompts * group_size
    env = make_env(cfg, n, cfg.base_task() if teacher is not None else None)  # a teacher plays base.teach
    frozen = SUMMARISERS.get(harness.summariser)(cfg, env, seed=seed + 7, base_path=base_path)
    if teacher is not None:
        rb = run_rollouts(env, teacher, harness, seed=seed, group_size=group_size, summariser=frozen,
                          quality=cfg.base.quality)
        return rb, env, None
    assert policy is not None
    policy.eval()
    agent = PolicyAgent(policy, n, temperature=cfg.train.temperature, greedy=greedy, generator=generator)
    rb = run_rollouts(env, agent, harness, seed=seed, group_size=group_size, summariser=frozen)
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
        names.metric(prefix, names.TOKENS_PER_EPISODE): tokens,
        names.metric(prefix, names.KEYS_PER_EPISODE): keys,
        names.metric(prefix, names.MFLOPS_PER_EPISODE): agent.policy.forward_flops(tokens, keys) / 1e6,
    }


def evaluate(cfg: RunConfig, policy: Policy, base_path: Path | None = None) -> dict[str, float]:
    """Held-out success in both configurations: compacted (the run's harness) and single-window."""
    out: dict[str, float] = {}
    configs = [(names.EVAL_COMPACTED, cfg.harness)]
    if cfg.eval.single_window:
        configs.append((names.EVAL_SINGLE_WINDOW, cfg.harness.replace(trigger="none")))
    gen = torch.Generator(device=policy.device).manual_seed(cfg.eval_seed)
    for prefix, harness in configs:
        rb, _, agent = collect(cfg, policy, harness=harness, prompts=cfg.eval.episodes, group_size=1,
                               seed=cfg.eval_seed, generator=gen, base_path=base_path)
        out.update(rollout_metrics(rb, prefix))
        assert agent is not None
        out.update(cost_metrics(agent, cfg.eval.episodes, prefix))
    return out


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
        scores = score(policy, tb, table, 1.0)
        count = tb.optimised.sum().clamp_min(1)
        loss = -(scores.logprobs.sum()) / count
        check_finite("behaviour-cloning loss", loss, step)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        if sink is not None:
            metrics = {names.BASE_LOSS: float(loss.detach()), **rollout_metrics(rb, names.BASE_TEACHER)}
            sink.log_metrics(metrics, step=step)
        if progress is not None:
            progress(1)


def base_harness(cfg: RunConfig) -> HarnessConfig:
    """Where demonstrations are collected: the preset's harness with the run's context geometry.

    The geometry (window, summary length, caps, v_sum) must match the run, since the policy's context
    and summary sizes follow it; the trigger is ``policy`` so the teacher also demonstrates when to emit
    COMPACT. Recipes that differ only in trigger, tail, discard or threshold share one base model.
    """
    return HarnessConfig().replace(**cfg.base_harness_settings())


def base_checkpoint(cfg: RunConfig, store: Path, sink: MetricSink | None = None, progress: Any = None) -> Path:
    """The cached base checkpoint for ``cfg`` (built once per task preset and base config)."""
    path = Path(store) / "base" / f"{cfg.preset}-{cfg.base_key()}.pt"
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
class Trainer:
    """RL from the base checkpoint with the run's recipe."""

    def __init__(self, cfg: RunConfig, policy: Policy, base_path: Path | None = None) -> None:
        self.cfg = cfg
        self.base_path = base_path
        self.policy = policy
        self.device = policy.device
        t = cfg.train
        self.opt = torch.optim.Adam(policy.parameters(), lr=t.lr)
        self.critic: Policy | None = None
        self.critic_opt: torch.optim.Optimizer | None = None
        if t.critic == "separate":
            self.critic = critic_from(policy)  # CompactionRL: critic initialised from the policy checkpoint
            self.critic_opt = torch.optim.Adam(self.critic.parameters(), lr=t.lr * t.critic_lr_scale)
        elif t.critic == "head":
            self.critic = policy
        self.gen = torch.Generator().manual_seed(cfg.seed)
        # rollouts sample on the policy's device; on the CPU they share the mini-batch stream as always
        self.sample_gen = self.gen if self.device.type == "cpu" else torch.Generator(self.device).manual_seed(cfg.seed)

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
        return collect(self.cfg, self.policy, harness=self.cfg.harness, prompts=t.prompts,
                       group_size=t.group_size, seed=seed, generator=self.sample_gen, base_path=self.base_path)

    def critic_values(self, tb: TokenBatch, table: Tensor) -> Tensor | None:
        """The critic's values on the batch's tokens, or ``None`` without a critic."""
        if self.critic is None:
            return None
        self.critic.eval()
        with torch.no_grad():
            return score(self.critic, tb, table, self.cfg.train.temperature).values

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
        est = credit.estimate(batch, t.estimator, **t.estimator_options())
        adv = est.advantages
        if t.whiten:
            adv = credit.whiten(adv, batch.token_mask)
        weights = credit.loss_weights(batch, t.normaliser, overlong_mask=t.overlong_mask)
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
        else:
            self.policy.eval()
            with torch.no_grad():  # old log-probs under the same masks the update uses (as verl recomputes them)
                old = score(self.policy, tb, table, t.temperature).logprobs
        rows = tb.tokens.shape[0]
        stats: dict[str, list[float]] = {names.LOSS_POLICY: [], names.LOSS_CLIP_FRACTION: [],
                                         names.LOSS_APPROX_KL: [], names.LOSS_ENTROPY: [], names.LOSS_GRAD_NORM: []}
        self.policy.train()
        for epoch in range(t.epochs):
            self.opt.zero_grad(set_to_none=True)
            total = torch.zeros((), device=self.device)
            for idx in minibatches(rows, t.minibatch_segments, self.gen):
                mb = tb.rows(idx)
                sc = score(self.policy, mb, table, t.temperature)
                if reuse and epoch == 0:
                    old[idx] = sc.logprobs.detach()
                w = grids["weights"][idx]
                loss, st = clipped_policy_loss(sc.logprobs, old[idx], grids["advantages"][idx], w,
                                               eps_low=t.eps_low, eps_high=t.eps_high)
                if t.entropy_coef:
                    loss = loss - t.entropy_coef * (w * sc.entropy).sum()
                check_finite("policy loss", loss, step)
                loss.backward()
                total = total + loss.detach()
                stats[names.LOSS_CLIP_FRACTION].append(st.clip_fraction)
                stats[names.LOSS_APPROX_KL].append(st.approx_kl)
                stats[names.LOSS_ENTROPY].append(weighted_entropy(sc.entropy.detach(), w))
            norm = torch.nn.utils.clip_grad_norm_(self.policy.parameters(), t.max_grad_norm)
            check_finite("policy gradient norm", norm, step)
            self.opt.step()
            stats[names.LOSS_POLICY].append(float(total))
            stats[names.LOSS_GRAD_NORM].append(float(norm))
        # mini-batches made only of masked or dummy segments have no weighted entropy
        finite = {k: [x for x in v if math.isfinite(x)] for k, v in stats.items()}
        return {k: float(np.mean(v)) if v else math.nan for k, v in finite.items()}

    def update_critic(self, tb: TokenBatch, table: Tensor, grids: dict[str, Tensor], step: int) -> dict[str, float]:
        """``value_updates`` critic regressions on the value targets; the last value loss."""
        assert self.critic is not None
        t = self.cfg.train
        opt = self.critic_opt if self.critic_opt is not None else self.opt
        rows = tb.tokens.shape[0]
        self.critic.train()
        last = math.nan
        for _ in range(t.value_updates):
            opt.zero_grad(set_to_none=True)
            total = torch.zeros((), device=self.device)
            for idx in minibatches(rows, t.minibatch_segments, self.gen):
                sc = score(self.critic, tb.rows(idx), table, t.temperature)
                assert sc.values is not None
                loss = value_loss(sc.values, grids["targets"][idx], grids["value_weights"][idx])
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
        padded_rows = -(-tb.tokens.shape[0] // t.minibatch_segments) * t.minibatch_segments
        tb = tb.pad_rows(padded_rows)
        values = self.critic_values(tb, table)
        batch, grids, adv = self.credit(rb, tb, values)
        metrics: dict[str, float] = {}
        if policy_update:
            metrics.update(self.update_policy(tb, table, grids, step))
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
        opts = credit.health.HealthOptions(normaliser=t.normaliser, overlong_mask=t.overlong_mask, gamma=t.gamma,
                                           lam=t.lam, **lam_opts)
        out = {names.health(k): v for k, v in credit.health.summary(batch, opts).items()}
        if batch.values is not None:  # a GAE run: its advantages against the concatenated reference
            out.update(credit.health.advantage_error(batch, adv, **t.estimator_options()))
        else:  # a group run: its advantages against rollout-group statistics (SUPO eq. 3)
            out.update(credit.health.group_advantage_gap(batch, adv, **t.estimator_options()))
        return out


def train(cfg: RunConfig, sink: MetricSink, *, store: Path | str = "mlruns", progress: bool = False,
          out_dir: Path | None = None) -> dict[str, float]:
    """Base checkpoint (cached), then ``train.steps`` RL steps with periodic evaluation.

    Returns the final evaluation metrics. Raises :class:`TrainingDiverged` on a non-finite loss; the
    last good checkpoint is left in place.
    """
    from tqdm import tqdm

    from simlab.config import flatten

    torch.manual_seed(cfg.seed)
    device = device_of(cfg)
    sink.log_params(flatten(cfg))
    t = cfg.train
    base_path = base_checkpoint(cfg, Path(store))
    torch.manual_seed(cfg.seed)  # whether the base was built now or cached, RL starts from the same state
    policy, _ = load_checkpoint(base_path, expected_vocab_size=cfg.policy.vocab_size, device=device,
                                expected_meta={"v_sum": cfg.harness.v_sum})
    if (cfg.train.critic == "head") != (policy.value is not None):
        policy = _with_value_head(policy, cfg)
    trainer = Trainer(cfg, policy, base_path)
    bar = tqdm(total=t.value_pretrain_steps + t.steps, desc="train", disable=not progress, leave=False)
    final: dict[str, float] = {}
    with contextlib.closing(bar):
        for step in range(t.value_pretrain_steps):  # critic-only steps (CompactionRL's value pretraining)
            sink.log_metrics({names.PRETRAIN + k: v for k, v in trainer.step(step, policy_update=False).items()},
                             step=step)
            bar.update(1)
        for step in range(t.steps + 1):
            metrics: dict[str, float] = {}
            if step % cfg.eval.every == 0 or step == t.steps:
                final = evaluate(cfg, policy, base_path)
                metrics.update(final)
            if step < t.steps:
                metrics.update(trainer.step(step))
                bar.update(1)
            sink.log_metrics(metrics, step=step)
    if out_dir is not None:
        save_checkpoint(Path(out_dir) / "policy.pt", policy, meta=checkpoint_meta(cfg))
    return final


def _with_value_head(policy: Policy, cfg: RunConfig) -> Policy:
    """The base checkpoint's trunk with (or without) a value head as the recipe asks."""
    fresh = Policy(cfg.policy).to(policy.device)
    fresh.load_state_dict(policy.state_dict(), strict=False)  # the head alone is missing or extra
    return fresh


__all__ = ["Trainer", "TrainingDiverged", "base_checkpoint", "behaviour_clone", "evaluate", "train"]
