"""Property tests: for any valid config, the vector env equals N single envs and keeps the protocol."""

from __future__ import annotations

import gymnasium
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simlab import tasks  # noqa: F401
from simlab.tasks import vocab

configs = st.fixed_dictionaries(
    {
        "env_id": st.sampled_from(["simlab/KeyRecall-v0", "simlab/PointerChase-v0"]),
        "vocab_size": st.integers(40, 80),
        "h0": st.integers(8, 14),
        "dh": st.integers(0, 6),
        "o1": st.integers(0, 6),
        "tail_prob": st.sampled_from([0.0, 0.3]),
        "noise": st.sampled_from([0.0, 0.2]),
        "corr": st.floats(-1, 1),
        "hard_frac": st.floats(0, 1),
        "seed": st.integers(0, 2**31),
    }
)


def _kwargs(c: dict) -> dict:
    lo = 8 if c["env_id"].endswith("PointerChase-v0") else 4
    return dict(
        vocab_size=c["vocab_size"],
        horizon=(c["h0"], c["h0"] + c["dh"]),
        obs_tokens=(lo, lo + c["o1"]),
        tail_prob=c["tail_prob"],
        tail_tokens=20,
        noise=c["noise"],
        compaction_reward_corr=c["corr"],
        hard_frac=c["hard_frac"],
    )


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(configs)
def test_vector_env_equals_single_envs_for_any_config(c: dict) -> None:
    kw = _kwargs(c)
    n = 3
    vec = gymnasium.make_vec(c["env_id"], num_envs=n, **kw)
    singles = [gymnasium.make(c["env_id"], **kw).unwrapped for _ in range(n)]
    vobs, _ = vec.reset(seed=c["seed"])
    for i, e in enumerate(singles):
        np.testing.assert_array_equal(vobs[i], e.reset(seed=c["seed"] + i)[0])
    rng = np.random.default_rng(c["seed"])
    restart = np.zeros(n, dtype=bool)
    query_seen = np.zeros(n, dtype=int)
    for _ in range(2 * (c["h0"] + c["dh"]) + 3):
        a = rng.integers(0, c["vocab_size"], n)
        vobs, vrew, vterm, _, _ = vec.step(a)
        for i, e in enumerate(singles):
            o, r, term = (e.reset()[0], 0.0, False) if restart[i] else e.step(int(a[i]))[:3]
            np.testing.assert_array_equal(vobs[i], o)
            assert vrew[i] == r and vterm[i] == term and r in (0.0, 1.0)
            tokens = o[o != vocab.PAD]
            query_seen[i] += int(tokens.size > 0 and tokens[-1] == vocab.QUERY)
            assert (o < c["vocab_size"]).all() and (o >= 0).all()
        restart = vterm.copy()
    assert (query_seen >= 1).all()  # every env reached its answer turn at least once
