"""The base model: behaviour cloning on a reference agent's demonstrations, cached per preset and base
config as a checkpoint; with the run's device and the metadata every checkpoint carries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from simlab import names
from simlab.config import RunConfig
from simlab.errors import ConfigError
from simlab.harness import HarnessConfig
from simlab.harness.phases import phase_table
from simlab.harness.protocol import Phase
from simlab.policy.checkpoint import load_checkpoint, save_checkpoint
from simlab.policy.device import default_device
from simlab.policy.model import Policy
from simlab.sinks import MetricSink
from simlab.stores import file_lock
from simlab.train.identity import base_harness, base_path, base_seed
from simlab.train.quality import check_metrics, check_seed, heldout_quality, measure
from simlab.train.rollouts import collect, rollout_metrics
from simlab.train.tokens import TokenBatch, check_finite, length_buckets, score
from simlab.update import Adam, Optimiser


def device_of(cfg: RunConfig) -> torch.device:
    """The run's torch device (``auto``: CUDA when present); a ConfigError for ``cuda`` on a machine without."""
    if cfg.device == "auto":
        return default_device()
    if cfg.device == "cuda" and not torch.cuda.is_available():
        raise ConfigError.invalid("device", "cuda", "this machine has no CUDA device; choose 'auto' or 'cpu'")
    return torch.device(cfg.device)


def checkpoint_meta(cfg: RunConfig, harness: HarnessConfig | None = None) -> dict[str, Any]:
    """What a checkpoint must remember: the summarisation instruction's version and the trigger settings,
    and the whole harness and task it was trained under (``simlab inspect --checkpoint`` replays them)."""
    h = harness or cfg.harness
    return {"v_sum": h.v_sum, "trigger": h.trigger, "frac": h.frac, "t_comp": h.t_comp, "window": h.window,
            "summary_tokens": h.summary_tokens, "preset": cfg.preset, "harness": h.model_dump(mode="json"),
            "task": cfg.task.model_dump(mode="json")}


def behaviour_clone(cfg: RunConfig, policy: Policy, sink: MetricSink | None = None,
                    progress: Any = None) -> dict[str, Any] | None:
    """Supervised learning on a reference agent's generated tokens (actions, summaries, answers, COMPACT).

    ``base.steps`` steps, then, where the gate (``base.min_gain``) or a plateau (``base.patience``) may stop
    it, on in ``base.check_every`` chunks up to ``base.max_steps`` (:class:`CloneChecks`). Returns the
    last check (the checkpoint keeps it, the gate reads it), or None without checks.
    """
    harness = base_harness(cfg)
    opt = Adam(policy.parameters(), cfg.base.lr)
    rng = np.random.default_rng(base_seed(cfg) + 12345)
    checks = CloneChecks(cfg)
    step = 0
    while not checks.done(step):
        seed = int(rng.integers(0, cfg.train_seed_limit - cfg.base.episodes))
        rb, env, _ = collect(cfg, None, harness=harness, prompts=cfg.base.episodes, group_size=1, seed=seed,
                             teacher=cfg.base.teacher)
        table = torch.from_numpy(phase_table(env, harness.trigger)).to(policy.device)
        tb = TokenBatch.from_rollouts(rb, policy.device)
        policy.train()
        loss = imitation_step(policy, opt, tb, table, cfg.base.minibatch_tokens, step, cfg.base.summary_weight)
        metrics = {names.BASE_LOSS: float(loss.detach()), **rollout_metrics(rb, names.BASE_TEACHER)}
        step += 1
        if checks.due(step):
            metrics.update(checks.run(policy, step))
        if sink is not None:
            sink.log_metrics(metrics, step=step - 1)
        if progress is not None:
            progress(1)
    return checks.last


class CloneChecks:
    """Behaviour cloning's checks of the base against its floor (``base.check_every``) and when they stop it.

    Cloning runs ``base.steps`` steps; past them (up to ``base.max_steps``) it stops at the first check that
    clears the gate (``base.min_gain``, without ``base.patience``) or that ends a plateau (``base.patience``
    checks in a row without a new best success). The last step is always checked where checks are on.
    """

    def __init__(self, cfg: RunConfig) -> None:
        self.cfg = cfg
        self.budget = clone_budget(cfg)
        self.last: dict[str, Any] | None = None
        self.curve: list[dict[str, float]] = []
        """Every check so far: ``steps`` and the check metrics (the checkpoint keeps them, ``simlab base``
        writes them)."""
        self.best, self.stale, self.stop = -1.0, 0, False

    def due(self, step: int) -> bool:
        """Whether a check follows cloning step ``step`` (1-based): every ``check_every`` and the last."""
        every = self.cfg.base.check_every
        return every is not None and (step % every == 0 or step >= self.budget)

    def done(self, step: int) -> bool:
        """Whether cloning stops before step ``step + 1``."""
        return step >= self.budget or (step >= self.cfg.base.steps and self.stop)

    def run(self, policy: Policy, step: int) -> dict[str, float]:
        """Check the base after ``step`` cloning steps; decide whether cloning may stop; the metrics to log."""
        b = self.cfg.base
        quality, _ = measure(self.cfg, policy, seed=check_seed(self.cfg), episodes=b.check_episodes)
        metrics = check_metrics(quality)
        self.curve.append({"steps": step, **metrics})
        self.last = {"steps": step, "episodes": b.check_episodes, "text": quality.describe(), "metrics": metrics,
                     "curve": self.curve}
        success = metrics[names.BASE_CHECK_SUCCESS]
        self.best, self.stale = (success, 0) if success > self.best else (self.best, self.stale + 1)
        cleared = b.min_gain is not None and 100 * quality.gain >= b.min_gain
        plateau = b.patience is not None and self.stale >= b.patience
        self.stop = plateau or (cleared and b.patience is None)
        return metrics


def imitation_step(policy: Policy, opt: Optimiser, tb: TokenBatch, table: Tensor, max_tokens: int,
                   step: int, summary_weight: float = 1.0) -> Tensor:
    """One optimiser step on the weighted mean negative log-likelihood of the batch's optimised tokens.

    Each summary token weighs ``summary_weight`` (``base.summary_weight``), every other token 1, and the
    loss is divided by the weights' sum, so the scale stays that of a mean (at 1, the plain mean, bit for
    bit). The gradient of the whole batch is accumulated over length buckets of at most ``max_tokens``
    token slots (0: the batch in one padded pass); returns the loss.
    """
    weights = tb.optimised * torch.where(tb.phase == int(Phase.SUMMARY), summary_weight, 1.0)  # (S, T)
    count = weights.sum().clamp_min(1)
    opt.zero_grad(set_to_none=True)
    total = torch.zeros((), device=tb.tokens.device)
    losses = []
    for mb in length_buckets(tb.lengths, max_rows=tb.tokens.shape[0], max_tokens=max_tokens):
        part = tb.take(mb)
        loss = -(score(policy, part, table, 1.0).logprobs * mb.of(weights)).sum() / count
        loss.backward()
        losses.append(loss.detach())
        total = total + loss.detach()
    check_finite("behaviour-cloning loss", losses, step)  # once, before the optimiser step
    torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
    opt.step()
    return total


def base_checkpoint(cfg: RunConfig, store: Path, sink: MetricSink | None = None, progress: Any = None) -> Path:
    """The cached base checkpoint for ``cfg`` (built once per task preset and base config)."""
    path = base_path(cfg, store)
    if cfg.base.cache and path.exists():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    with file_lock(path, ".lock"):
        if cfg.base.cache and path.exists():  # another worker built it while we waited
            return path
        torch.manual_seed(base_seed(cfg))
        policy = Policy(cfg.policy.replace(value_head=False)).to(device_of(cfg))
        check = behaviour_clone(cfg, policy, sink, progress)
        meta = checkpoint_meta(cfg)
        if check is not None:
            meta["check"] = check
        save_checkpoint(path, policy, meta=meta)
    return path


def clone_budget(cfg: RunConfig) -> int:
    """The most behaviour-cloning steps ``cfg``'s base may take (a progress bar's total)."""
    return cfg.base.steps if cfg.base.max_steps is None else cfg.base.max_steps


def base_quality(cfg: RunConfig, store: Path,
                 progress: Any = None) -> tuple[dict[str, float], int, list[dict[str, float]]]:
    """Build (or reuse) ``cfg``'s base checkpoint under ``store`` and measure it on ``cfg``'s held-out set:
    the metrics a run logs at step 0 (:func:`heldout_quality`), the cloning steps the base took, and its
    cloning checks in order (``base.check_every``; empty without checks, or for a checkpoint saved before
    it kept them)."""
    path = base_checkpoint(cfg, store, progress=progress)
    policy, meta = load_checkpoint(path, expected_vocab_size=cfg.policy.vocab_size, device=device_of(cfg),
                                   expected_meta={"v_sum": cfg.harness.v_sum})
    check = meta.get("check")
    steps = int(check["steps"]) if check is not None else cfg.base.steps
    return heldout_quality(cfg, policy, path), steps, list(check.get("curve", [])) if check is not None else []
