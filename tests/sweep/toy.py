"""A small real trial backend for runner tests: noisy gradient descent on a quadratic.

It stands in for simlab's trainer behind the same :class:`~simlab.sweep.backend.TrialBackend` contract:
settings validated by key path, metrics through the sink every step, ``TrainingDiverged`` when the loss
stops being finite (step size above 2/curvature). ``train.step_seconds`` slows steps down so a test can
kill a sweep mid-trial.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simlab.credit import ESTIMATORS, NORMALISERS
from simlab.errors import ConfigError
from simlab.sinks import MetricSink
from simlab.sweep.backend import TrialBackend
from simlab.sweep.spec import SpecLayer, merged


class TrainingDiverged(RuntimeError):
    """The loss is not finite (the trainer's contract)."""


@dataclass(frozen=True)
class ToyConfig:
    lr: float = 0.1
    steps: int = 8
    estimator: str = "rollout_group"
    normaliser: str = "token"
    overlong_mask: bool = True
    step_seconds: float = 0.0
    seed: int = 0


KEYS = {f"train.{k}" for k in ToyConfig.__dataclass_fields__ if k != "seed"}


def build(layers: list[SpecLayer], seed: int) -> ToyConfig:
    values: dict[str, Any] = {}
    for key, value in merged(layers).items():
        if key in ("preset", "recipe"):
            continue
        if key not in KEYS:
            raise ConfigError.unknown(key, sorted(KEYS))
        values[key.split(".", 1)[1]] = value
    cfg = ToyConfig(**values, seed=seed)
    if isinstance(cfg.lr, bool) or not isinstance(cfg.lr, int | float) or cfg.lr <= 0:
        raise ConfigError.invalid("train.lr", cfg.lr, "choose a number > 0")
    if isinstance(cfg.steps, bool) or not isinstance(cfg.steps, int) or cfg.steps < 1:
        raise ConfigError.invalid("train.steps", cfg.steps, "choose an integer >= 1")
    ESTIMATORS.canonical(cfg.estimator)
    NORMALISERS.canonical(cfg.normaliser)
    return cfg


def train(cfg: ToyConfig, sink: MetricSink, store: Path) -> dict[str, float]:
    rng = np.random.default_rng(cfg.seed)
    curvature = 3.0 if cfg.overlong_mask else 2.5
    x = 4.0
    success = 0.0
    for step in range(cfg.steps):
        with np.errstate(over="ignore", invalid="ignore"):
            x = x - cfg.lr * (curvature * x + 0.05 * rng.standard_normal())
            loss = 0.5 * curvature * x * x
        if not math.isfinite(loss) or abs(x) > 1e6:
            raise TrainingDiverged(f"loss is {loss} at step {step}")
        success = math.exp(-loss)
        rate = min(1.0, 0.2 + 0.05 * step)
        counts = rng.multinomial(64, [1 - rate, rate * 0.7, rate * 0.3])
        sink.log_metrics(
            {
                "train/loss": loss,
                "eval/compacted_success": success,
                "compaction_rate": rate,
                **{f"segments/count_{k + 1}": float(c) for k, c in enumerate(counts)},
            },
            step,
        )
        if cfg.step_seconds:
            time.sleep(cfg.step_seconds)
    return {"eval/compacted_success": success, "train/loss": 0.5 * curvature * x * x}


BACKEND = TrialBackend(
    build=build,
    flatten=lambda cfg: {f"train.{k}": v for k, v in asdict(cfg).items()},
    tags=lambda cfg: {"simlab.estimator": cfg.estimator, "simlab.normaliser": cfg.normaliser},
    train=train,
)
