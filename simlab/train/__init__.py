"""The trainer: base model (behaviour cloning), RL by every recipe, evaluation, checkpoints.

Data flow per RL step: task (vector env) -> harness (``run_rollouts`` with a :class:`PolicyAgent`) ->
SegmentBatch -> credit (``advantages``, ``loss_weights``, ``value_targets``) -> update (clipped loss,
critic) -> metrics (a :class:`MetricSink`). Every advantage and loss weight comes from the credit layer;
this package only moves tensors between it and the model. Its modules:

- this one: :func:`train`, a whole run (base checkpoint, RL steps, evaluations, the episodes table);
- :mod:`simlab.train.tokens`: the rollout batch as token tensors, mini-batches, grid maps, scoring;
- :mod:`simlab.train.rollouts`: collecting rollouts, held-out evaluation and their metrics;
- :mod:`simlab.train.base`: the base model (behaviour cloning, its cached checkpoint), the run's device;
- :mod:`simlab.train.rl`: :class:`~simlab.train.rl.Trainer`, one RL step (rollouts, credit, updates, health).
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path

import polars as pl
import torch

from simlab import names, stores
from simlab.config import RunConfig
from simlab.policy.checkpoint import load_checkpoint, save_checkpoint
from simlab.policy.model import Policy
from simlab.sinks import MetricSink
from simlab.train.base import base_checkpoint, checkpoint_meta, device_of
from simlab.train.quality import gate, heldout_quality
from simlab.train.rl import Trainer
from simlab.train.rollouts import evaluate


def train(cfg: RunConfig, sink: MetricSink, *, store: Path | str | None = None, progress: bool = False,
          out_dir: Path | None = None) -> dict[str, float]:
    """Base checkpoint (cached, under ``store``; default: the local store ``<home>/mlruns``, as the CLI's),
    then ``train.steps`` RL steps with periodic evaluation.

    Returns the final evaluation metrics. Raises :class:`~simlab.errors.BaseGateError` before anything is logged
    where the base misses ``base.min_gain``, and :class:`~simlab.errors.TrainingDiverged` on a non-finite loss;
    the last good checkpoint is left in place.
    """
    from tqdm import tqdm

    from simlab.config import flatten

    torch.manual_seed(cfg.seed)
    device = device_of(cfg)
    t = cfg.train
    base_path = base_checkpoint(cfg, Path(store) if store is not None else stores.local_store())
    torch.manual_seed(cfg.seed)  # whether the base was built now or cached, RL starts from the same state
    policy, meta = load_checkpoint(base_path, expected_vocab_size=cfg.policy.vocab_size, device=device,
                                   expected_meta={"v_sum": cfg.harness.v_sum})
    check = meta.get("check")
    gate(cfg, check)  # a base below the gate stops the run before it writes anything
    sink.log_params(flatten(cfg))
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):  # RL's draws stay as they were
        before_rl = {**(heldout_quality(cfg, policy, base_path) if cfg.eval.base_quality else {}),
                     **(check["metrics"] if check is not None else {})}  # logged with step 0's metrics
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
            metrics: dict[str, float] = before_rl if step == 0 else {}
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
