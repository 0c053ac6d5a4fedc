"""A preset can name a larger policy and a longer window; the trainer takes it without code changes."""

from __future__ import annotations

import math

from simlab.config import resolve
from simlab.sinks import JsonlSink, read_metrics
from simlab.tasks.config import KeyRecallConfig
from simlab.tasks.presets import PRESETS, Preset
from simlab.train import train

WIDE = Preset(
    "keyrecall-wide-test",
    "simlab/KeyRecall-v0",
    KeyRecallConfig(num_facts=2, horizon=(12, 14), vocab_size=32, obs_tokens=(3, 5)),
    dict(window=128, frac=0.8, summary_tokens=4, tail_steps=1, max_compactions=4, max_steps=32),
    "a 4-layer, d = 256 policy over a 128-token window",
    policy=dict(n_layer=4, n_head=8, d_model=256),
    base=dict(steps=1, episodes=4),
    train=dict(steps=1, prompts=2, group_size=2, minibatch_segments=8),
)


def test_a_preset_with_a_larger_policy_and_window_trains_a_step_on_the_cpu(tmp_path, monkeypatch):
    monkeypatch.setitem(PRESETS, WIDE.name, WIDE)
    cfg = resolve({"task": {"preset": WIDE.name}, "train": {"recipe": "supo"},
                   "eval": {"every": 1, "episodes": 2, "single_window": False}, "device": "cpu"})
    assert (cfg.policy.n_layer, cfg.policy.d_model, cfg.harness.window) == (4, 256, 128)
    assert cfg.policy.max_len >= 128
    sink = JsonlSink(tmp_path / "run")
    final = train(cfg, sink, store=tmp_path / "store")
    sink.close()
    steps = [r for r in read_metrics(tmp_path / "run") if "train/success" in r]
    assert len(steps) == 1 and steps[0]["perf/rollout_tokens"] > 0
    assert math.isfinite(steps[0]["loss/grad_norm"]) and steps[0]["loss/grad_norm"] > 0
    assert 0.0 <= final["eval/compacted/success"] <= 1.0
