"""The verbatim tail: the newest k steps, shrunk to fit; a k beyond the steps in context keeps them all."""

from __future__ import annotations

import numpy as np

from simlab.config import resolve
from simlab.harness import run_rollouts
from simlab.train.rollouts import make_env


def _play(tail_steps: int):
    harness = {"trigger": "budget", "t_comp": 52, "tail_steps": tail_steps, "max_compactions": 20}
    cfg = resolve({"task": {"preset": "keyrecall-heavy"}, "harness": harness})
    env = make_env(cfg, 64)
    try:
        return run_rollouts(env, "oracle", cfg.harness, seed=5, group_size=1)
    finally:
        env.close()


def test_a_tail_longer_than_the_context_keeps_every_step() -> None:
    # k = 12 already keeps every step that fits here, so k = 12 and k = 1000 must play alike;
    # the tail once took steps[len - k:], which for len < k < 2 len kept only the last 2 len - k of them
    short, long = _play(12), _play(1000)
    assert sum(r.compactions for r in short.rollouts) > 64
    for x, y in zip(short.padded().values(), long.padded().values(), strict=True):
        assert np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
