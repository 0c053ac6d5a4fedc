"""Property test: for any valid harness setting, the invariants hold (caps, window, bounds, records)."""

from __future__ import annotations

import gymnasium
import numpy as np
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from simlab.harness import TRIGGERS, HarnessConfig, run_rollouts
from simlab.tasks import vocab
from simlab.tasks.config import ConfigError

from .helpers import KR, PC, check_consistency

settings_ = st.fixed_dictionaries(
    {
        "env_id": st.sampled_from([KR, PC]),
        "trigger": st.sampled_from(TRIGGERS.names()),
        "window": st.integers(48, 160),
        "frac": st.floats(0.4, 1.0),
        "t_comp": st.integers(8, 40),
        "chunk_steps": st.integers(1, 6),
        "tail_steps": st.integers(0, 3),
        "summary_tokens": st.integers(2, 8),
        "max_compactions": st.integers(0, 12),
        "max_steps": st.integers(3, 40),
        "discard": st.booleans(),
        "summariser": st.sampled_from(["self", "none", "oracle"]),
        "tail_prob": st.sampled_from([0.0, 0.2]),
        "agent": st.sampled_from(["oracle", "scripted", "random"]),
        "seed": st.integers(0, 1000),
    }
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)
@given(settings_)
def test_invariants_hold_for_any_valid_setting(s: dict) -> None:
    keys = (
        "trigger",
        "window",
        "frac",
        "t_comp",
        "chunk_steps",
        "tail_steps",
        "summary_tokens",
        "max_compactions",
        "max_steps",
        "discard",
        "summariser",
    )
    try:
        cfg = HarnessConfig(**{k: s[k] for k in keys})
        env = gymnasium.make_vec(s["env_id"], num_envs=6, tail_prob=s["tail_prob"], tail_tokens=24)
        rb = run_rollouts(env, s["agent"], cfg, seed=s["seed"])
    except ConfigError:
        assume(False)
        return
    check_consistency(rb)
    trig = TRIGGERS.get(cfg.trigger)
    for rec in rb.rollouts:
        assert rec.steps <= cfg.max_steps
        assert rec.context_lengths.max() <= cfg.window
        if trig.kind == "summary":
            assert rec.compactions <= cfg.max_compactions
        if trig.kind == "never":
            assert rec.compactions == 0
        if rec.overlong == "compactions":
            assert rec.compactions == cfg.max_compactions
        if trig.name in ("threshold", "budget") and cfg.discard:
            limit = cfg.threshold if trig.name == "threshold" else cfg.window - cfg.t_comp
            assert rec.context_lengths.max() <= limit + len(vocab.v_sum()) + max(2, cfg.summary_tokens)
    assert rb.batch.num_rollouts == 6
    np.testing.assert_array_equal(rb.batch.finished, [r.finished for r in rb.rollouts])
