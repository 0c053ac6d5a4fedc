"""Learning is shown, not assumed: RL raises compacted success significantly above the base model's.

The run is the demo preset (``keyrecall-mini``) at a smaller budget and window (W = 32, two or three
compactions per rollout), with the fact always in the first step so that keeping it is a positional
copy: 40 behaviour-cloning steps leave the policy near chance, and 12 ``supo`` steps (lr 6e-4, 32
prompts x 8) teach it to keep the fact and read it back. The assertion compares the held-out
evaluation right after the base model (RL step 0) with the one after the last RL step, on the same
held-out instances, and asks for a rise of more than two standard errors of the binomial difference.
Seeds are fixed, so on CPU the result is deterministic.
"""

from __future__ import annotations

import math

from simlab.config import resolve
from simlab.sinks import JsonlSink, read_metrics
from simlab.train import train

LEARN = {
    "task": {"preset": "keyrecall-mini", "fact_frac": 0.1},
    "harness": {"window": 32},
    "base": {"steps": 40},
    "train": {"recipe": "supo", "steps": 12},
    "eval": {"every": 12, "episodes": 256, "single_window": False},
}

def test_rl_raises_compacted_success_above_the_base_model(tmp_path):
    cfg = resolve(LEARN)
    sink = JsonlSink(tmp_path / "run")
    train(cfg, sink, store=tmp_path / "store")
    sink.close()
    rows = read_metrics(tmp_path / "run")
    evals = [r["eval/compacted/success"] for r in rows if "eval/compacted/success" in r]
    before, after = evals[0], evals[-1]
    n = cfg.eval.episodes
    se = math.sqrt(before * (1 - before) / n + after * (1 - after) / n)
    assert after - before > 2 * se, (
        f"compacted success {before:.3f} -> {after:.3f}, SE of the difference {se:.3f}")
