"""Per-rollout randomness: the ``rollout`` reset option, PeekRead's bursts and coupling.

What is pinned: the single env equals the batched env with the option (autoresets included); the
envs pass ``check_env`` with the knobs on; with the knobs off nothing a seed draws changes (the hashes
below were recorded on the commit before the option existed); the stream is keyed by (instance,
rollout index); and a burst or a lost fact does exactly what the docstring says, hand-checked.
"""

from __future__ import annotations

import dataclasses
import hashlib

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import given, settings
from hypothesis import strategies as st

from simlab import tasks
from simlab.tasks import core, peekread, vocab
from simlab.tasks.presets import PRESETS

PR = "simlab/PeekRead-v0"
BURSTS = dict(vocab_size=34, horizon=(6, 7), read_tokens=(7, 8), hard_frac=0.1, read_payoff=0.75,
              burst_prob=0.5, burst_steps=2, burst_tokens=30, coupling=0.5, noise=0.05)


DERIVED = ("facts", "cued")
"""Instance fields read off what was drawn (issue 42's summary metrics), not draws: left out of the hash."""


def instance_hash(env_id: str, config: object, options: dict | None = None) -> str:
    """A hash of what a 40-env vector env draws at seed 123 and shows over 60 steps of sensible actions."""
    env = gymnasium.make_vec(env_id, num_envs=40, config=config)
    h = hashlib.sha256()
    obs, _ = env.reset(seed=123, options=options)
    h.update(obs.tobytes())
    for f in dataclasses.fields(env.instances):
        x = getattr(env.instances, f.name)
        if x is not None and f.name not in DERIVED:
            h.update(np.ascontiguousarray(x).tobytes())
    rng = np.random.default_rng(0)
    for _ in range(60):
        o, r, term, _, _ = env.step(rng.choice(env.metadata["act_tokens"], 40))
        h.update(o.tobytes())
        h.update(r.tobytes())
        h.update(term.tobytes())
    return h.hexdigest()[:16]


BEFORE_THE_OPTION = {
    "keyrecall-tiny": "a703e00c408e090c", "keyrecall-mini": "ae0a0a6718a1ff6d", "keyrecall-duo": "ddcd48e1a78fc582",
    "keyrecall-heavy": "bb6aeb04b76e4d40", "keyrecall-corr-pos": "0a737fb91a1dae5a",
    "keyrecall-corr-neg": "41f02172b914a75c", "pointerchase-tiny": "030e76011f438919",
    "peekread-pos": "084f2062a0aede8a", "peekread-neg": "84214295f2f1878b", "peekread-zero": "8c32e1f2e28ec02f",
    "pointerchase-long": "111a46c0360d3bce",
}
"""``instance_hash`` of every preset that existed before per-rollout randomness (commit 7ee6af2)."""


@pytest.mark.parametrize("name", sorted(BEFORE_THE_OPTION))
def test_knobs_off_draw_what_they_drew_before_the_option_existed(name: str) -> None:
    p = PRESETS[name]
    assert instance_hash(p.env_id, p.task) == BEFORE_THE_OPTION[name]
    # and the rollout index changes nothing while the task draws nothing per rollout
    assert instance_hash(p.env_id, p.task, {"rollout": list(range(40))}) == BEFORE_THE_OPTION[name]


@pytest.mark.parametrize("env_id", tasks.ENV_IDS)
def test_check_env_passes_with_the_option(env_id: str) -> None:
    kw = BURSTS if env_id == PR else {}
    env = gymnasium.make(env_id, **kw).unwrapped
    check_env(env, skip_render_check=True)
    obs, _ = env.reset(seed=1, options={"rollout": 3})
    assert env.observation_space.contains(obs)


@pytest.mark.parametrize("n", [6, 40])
def test_batched_env_equals_single_envs_with_rollout_indices_and_autoresets(n: int) -> None:
    kw = {**BURSTS, "horizon": (5, 7), "burst_steps": 2} if n == 40 else BURSTS
    vec = gymnasium.make_vec(PR, num_envs=n, **kw)
    vec.refill_share = 1.0 if n == 40 else 0.125  # 1.0: envs often reset on a stale buffer
    singles = [gymnasium.make(PR, **kw).unwrapped for _ in range(n)]
    seeds, rollouts = [7 + i // 4 for i in range(n)], [i % 4 for i in range(n)]  # groups of G = 4
    vobs, _ = vec.reset(seed=seeds, options={"rollout": rollouts})
    sobs = [e.reset(seed=s, options={"rollout": j})[0] for e, s, j in zip(singles, seeds, rollouts, strict=True)]
    np.testing.assert_array_equal(vobs, np.stack(sobs))
    rng = np.random.default_rng(0)
    restart = np.zeros(n, dtype=bool)
    bursts = ends = 0
    for _ in range(40):
        actions = np.where(rng.random(n) < 0.6, peekread.READ, peekread.PEEK)
        vobs, vrew, vterm, _, _ = vec.step(actions)
        for i, e in enumerate(singles):  # an autoreset keeps the env's rollout index, as a seedless reset does
            o, r, term = (e.reset()[0], 0.0, False) if restart[i] else e.step(int(actions[i]))[:3]
            np.testing.assert_array_equal(vobs[i], o)
            assert vrew[i] == r and vterm[i] == term
        bursts += int(((vobs != vocab.PAD).sum(axis=1) == kw["burst_tokens"]).sum())
        restart = vterm.copy()
        ends += int(vterm.sum())
    assert ends >= n and bursts > 0  # episodes ended and bursts happened inside the window


def test_the_stream_is_keyed_by_instance_and_rollout_index() -> None:
    cfg = tasks.PeekReadConfig(**BURSTS)
    keys = core.episode_keys(np.full(64, 5), np.arange(64))
    draws = {j: peekread.generate(keys, cfg, core.rollout_keys(keys, np.full(64, j))) for j in range(3)}
    again = peekread.generate(keys, cfg, core.rollout_keys(keys, np.full(64, 1)))
    for f in dataclasses.fields(again):  # one rollout index replays bit for bit
        a, b = getattr(again, f.name), getattr(draws[1], f.name)
        assert (a is None and b is None) or np.array_equal(a, b)
    for f in ("prompt", "obs", "expected", "answer", "horizon", "hard", "target", "slip"):
        for j in (1, 2):  # the instance is shared by the group
            np.testing.assert_array_equal(getattr(draws[0], f), getattr(draws[j], f))
    armed0, armed1 = draws[0].arm_step >= 0, draws[1].arm_step >= 0
    assert (armed0 != armed1).any()  # two rollouts of one group differ
    assert 0.3 < armed0.mean() < 0.7  # burst_prob 0.5
    assert not np.array_equal(draws[0].alt_obs, draws[1].alt_obs)  # the coupling too, through the read


@settings(max_examples=20, deadline=None)
@given(p=st.floats(0, 1), c=st.floats(-1, 1), seed=st.integers(0, 2**31), j=st.integers(0, 63))
def test_what_the_instance_shows_on_a_peek_never_depends_on_the_rollout(p: float, c: float, seed: int, j: int) -> None:
    cfg = tasks.PeekReadConfig(**{**BURSTS, "burst_prob": p, "coupling": c})
    keys = core.episode_keys(np.full(8, seed), np.arange(8))
    a = peekread.generate(keys, cfg, core.rollout_keys(keys, np.zeros(8, dtype=np.int64)))
    b = peekread.generate(keys, cfg, core.rollout_keys(keys, np.full(8, j)))
    np.testing.assert_array_equal(a.obs, b.obs)
    np.testing.assert_array_equal(a.answer, b.answer)


def play(route: list[int], rollout: int = 0, **config: object) -> list[np.ndarray]:
    """One episode of a 6-step instance (fact at step 0), the route's last action repeated; the observations."""
    env = gymnasium.make(PR, **{"horizon": (6, 6), "hard_frac": 0.0, "vocab_size": 34, "read_tokens": (7, 8),
                                "burst_tokens": 20, **config}).unwrapped
    env.reset(seed=5, options={"rollout": rollout})
    seen = []
    for t in range(6):
        obs = env.step(route[min(t, len(route) - 1)])[0]
        seen.append(obs[obs != vocab.PAD])
    return seen


def has_fact(obs: np.ndarray) -> bool:
    return obs.size >= 3 and obs[0] == vocab.FACT


def test_a_read_at_the_fact_step_bursts_over_the_next_steps_whatever_the_action() -> None:
    reads = play([peekread.READ, peekread.PEEK], burst_prob=1.0, burst_steps=2)
    assert has_fact(reads[0]) and [o.size for o in reads[1:3]] == [20, 20]
    assert not (reads[1] == vocab.FACT).any()  # distractor values only: no fake fact
    assert has_fact(reads[3]) and reads[3].size <= 4  # the short restatement that ends the burst
    np.testing.assert_array_equal(reads[3][:3], reads[0][:3])
    assert reads[4].size <= 4 and not has_fact(reads[4]) and reads[5][-1] == vocab.QUERY
    peeks = play([peekread.PEEK], burst_prob=1.0, burst_steps=2)
    assert all(o.size <= 4 for o in peeks[:5]) and not any(has_fact(o) for o in peeks[1:])  # the read route's
    late = play([peekread.PEEK, peekread.READ], burst_prob=1.0, burst_steps=2)
    assert all(o.size <= 8 for o in late[:5])  # only a read at the fact step arms it
    quiet = play([peekread.READ], burst_prob=1.0, burst_steps=4, burst_restates=False)
    assert [o.size for o in quiet[1:5]] == [20] * 4 and quiet[5][-1] == vocab.QUERY  # never over the query
    assert not any(has_fact(o) for o in quiet[1:])


@pytest.mark.parametrize(("p", "c", "shows"), [(1.0, 1.0, False), (1.0, 0.0, True), (0.0, 1.0, True),
                                               (0.0, -1.0, False), (1.0, -1.0, True), (0.0, 0.0, True)])
def test_the_coupling_decides_whether_the_read_shows_the_fact(p: float, c: float, shows: bool) -> None:
    for rollout in range(4):
        reads = play([peekread.READ, peekread.PEEK], rollout=rollout, burst_prob=p, coupling=c, burst_steps=2)
        assert has_fact(reads[0]) == shows
        assert (reads[1].size == 20) == (p == 1.0)
        assert has_fact(reads[3]) == (shows and p == 1.0)  # a lost fact is not restated either


def test_a_lost_fact_stays_lost_on_the_peek_route_only_as_read_payoff_says() -> None:
    # the coupling acts on the read; a peek shows the fact with probability 1 - read_payoff as before
    peeks = play([peekread.PEEK], burst_prob=1.0, coupling=1.0, read_payoff=0.0)
    assert has_fact(peeks[0])


@pytest.mark.parametrize(("options", "needle"), [
    ({"rollout": -1}, r"`options\['rollout'\]=-1` is invalid; choose an integer >= 0"),
    ({"rollout": [0, 1]}, r"choose an integer >= 0 or a list of 3"),
    ({"rollout": 1.5}, r"`options\['rollout'\]=1.5` is invalid"),
    ({"reset_mask": 1}, r"the only reset option is 'rollout'"),
])
def test_bad_reset_options_name_the_option(options: dict, needle: str) -> None:
    with pytest.raises(ValueError, match=needle):
        gymnasium.make_vec(PR, num_envs=3).reset(seed=0, options=options)


def test_a_single_env_takes_one_index() -> None:
    env = gymnasium.make(PR).unwrapped
    with pytest.raises(ValueError, match=r"`options\['rollout'\]=\[0, 1\]` is invalid; choose an integer >= 0$"):
        env.reset(seed=0, options={"rollout": [0, 1]})


@pytest.mark.parametrize(("settings", "needle"), [
    ({"burst_prob": 1.5}, r"`task.burst_prob=1.5` is invalid; choose a value in \[0, 1\]"),
    ({"coupling": -2.0}, r"`task.coupling=-2.0` is invalid; choose a value in \[-1, 1\]"),
    ({"burst_steps": 0}, r"`task.burst_steps=0` is invalid; choose an integer in \[1, 4096\]"),
    ({"burst_prob": 0.5, "burst_tokens": 14},
     r"`task.burst_tokens=14` is invalid; choose an integer in \[15, 4096\] \(longer than a read\)"),
    ({"burst_prob": 0.5, "burst_steps": 3}, r"`task.burst_steps=3` is invalid; choose an integer in \[1, 2\]"),
    ({"burst_prob": 0.5, "burst_steps": 4, "burst_restates": False},
     r"`task.burst_steps=4` is invalid; choose an integer in \[1, 3\] \(horizon\[0\] - 2"),
    ({"burst_prob": 0.5, "horizon": (3, 4)}, r"`task.burst_prob=0.5` is invalid; a burst needs a step"),
    ({"burst_restates": "yes"}, r"`task.burst_restates='yes'` is invalid; choose true or false"),
])
def test_bad_burst_settings_name_the_key(settings: dict, needle: str) -> None:
    with pytest.raises(tasks.ConfigError, match=needle):
        gymnasium.make(PR, **{"horizon": (5, 6), **settings})


def test_full_information_shows_the_fact_on_every_route() -> None:
    cfg = tasks.PeekReadConfig(**{**BURSTS, "read_payoff": 1.0, "coupling": 1.0, "hard_frac": 0.5})
    full = cfg.full_information()
    assert (full.hard_frac, full.read_payoff, full.coupling) == (0.0, 0.0, 0.0)
    assert (full.burst_prob, full.burst_steps, full.horizon) == (cfg.burst_prob, cfg.burst_steps, cfg.horizon)
    traps = tasks.PeekReadConfig(read_payoff=-0.3).full_information()
    assert traps.read_payoff == -0.3  # traps are no withheld information
    assert tasks.KeyRecallConfig(hard_frac=0.4).full_information().hard_frac == 0.0
