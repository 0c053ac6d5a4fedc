"""PeekRead: what an action costs and what it shows, at each sign of ``read_payoff``."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

from simlab import tasks  # noqa: F401  (registers the envs)
from simlab.tasks import peekread, vocab
from simlab.tasks.config import ConfigError

ID = "simlab/PeekRead-v0"


def play(route: list[int], **config) -> tuple[list[np.ndarray], float, gymnasium.Env]:
    """Play one episode with the given actions (the last one repeated), then answer correctly."""
    env = gymnasium.make(ID, horizon=(6, 6), hard_frac=0.0, **config).unwrapped
    env.reset(seed=5)
    seen = []
    for t in range(6):
        obs, r, term, _, _ = env.step(route[min(t, len(route) - 1)])
        seen.append(obs[obs != vocab.PAD])
        assert r == 0 and not term
    _, reward, term, _, _ = env.step(int(env.instances.answer[0]))
    assert term
    return seen, reward, env


def has_fact(obs: np.ndarray) -> bool:
    return obs.size >= 3 and obs[0] == vocab.FACT


def test_a_read_is_longer_than_a_peek():
    peeks, _, env = play([peekread.PEEK], read_payoff=0.0)
    reads, _, _ = play([peekread.READ], read_payoff=0.0)
    cfg = env.config
    for p, r in zip(peeks[:-1], reads[:-1], strict=True):  # the query observation is shared
        assert cfg.obs_tokens[0] <= p.size <= cfg.obs_tokens[1]
        assert cfg.read_tokens[0] <= r.size <= cfg.read_tokens[1]
    np.testing.assert_array_equal(peeks[-1], reads[-1])
    assert peeks[-1][-1] == vocab.QUERY and peeks[-1][-2] == env.instances.target[0]


def test_positive_payoff_puts_the_fact_only_in_the_read():
    peeks, won_peek, env = play([peekread.PEEK], read_payoff=1.0)
    reads, won_read, _ = play([peekread.READ], read_payoff=1.0)
    step = 0  # fact_frac 0.2 of a 6-step horizon: the first step
    assert has_fact(reads[step]) and not any(has_fact(o) for o in peeks)
    assert reads[step][1] == env.instances.target[0] and reads[step][2] == env.instances.answer[0]
    assert won_peek == won_read == 1.0  # the env pays for the right answer; seeing it is the agent's problem


def test_zero_payoff_shows_the_same_fact_on_both_routes_and_never_traps():
    peeks, won_peek, _ = play([peekread.PEEK], read_payoff=0.0)
    reads, won_read, _ = play([peekread.READ], read_payoff=0.0)
    np.testing.assert_array_equal(peeks[0][:3], reads[0][:3])
    assert has_fact(peeks[0]) and won_peek == won_read == 1.0


def test_negative_payoff_traps_reads_after_the_fact():
    _, won_peek, env = play([peekread.PEEK], read_payoff=-1.0)
    assert won_peek == 1.0
    traps = np.flatnonzero(env.instances.expected[0] == peekread.PEEK)
    assert traps.tolist() == [1, 2, 3, 4]  # every step after the fact and before the query
    _, won, _ = play([peekread.READ, peekread.READ], read_payoff=-1.0)
    assert won == 0.0
    _, won, _ = play([peekread.READ, peekread.PEEK], read_payoff=-1.0)  # read only where the fact is
    assert won == 1.0


@pytest.mark.parametrize(("key", "value"), [("read_payoff", 1.5), ("read_tokens", (4, 20)), ("fact_frac", 0.0)])
def test_bad_config_names_the_key(key, value):
    with pytest.raises(ConfigError, match=rf"`task\.{key}(\[\d\])?="):
        gymnasium.make(ID, **{key: value})  # the message starts `task.KEY=` or `task.KEY[i]=`


def test_scripted_route_is_sticky_and_the_oracle_reads_only_when_it_pays():
    env = gymnasium.make(ID, read_payoff=1.0).unwrapped
    solver = env.solver
    rng = np.random.default_rng(0)
    first = {solver.act(np.array([vocab.BOS, vocab.TASK]), rng) for _ in range(40)}
    assert first == {peekread.PEEK, peekread.READ}  # a coin when no action of its own is in context
    ctx = np.array([vocab.BOS, vocab.TASK, vocab.ACT, peekread.READ, vocab.OBS, 30, 31])
    assert {solver.act(ctx, rng) for _ in range(20)} == {peekread.READ}
    target = 20
    assert solver.oracle_act(ctx, target, rng) == peekread.READ  # the fact is not known yet
    known = np.array([vocab.BOS, vocab.TASK, vocab.ACT, peekread.READ, vocab.OBS, vocab.FACT, target, 24])
    assert solver.oracle_act(known, target, rng) == peekread.PEEK
    trap = gymnasium.make(ID, read_payoff=-0.5).unwrapped.solver
    assert trap.oracle_act(ctx, target, rng) == peekread.PEEK


def test_reread_restates_the_fact_in_every_later_read_and_nowhere_else():
    reads, _, env = play([peekread.READ], read_payoff=0.0, reread=True)
    peeks, _, _ = play([peekread.PEEK], read_payoff=0.0, reread=True)
    key, value = int(env.instances.target[0]), int(env.instances.answer[0])
    for obs in reads[:-1]:  # the fact step and every read after it, the query's step excepted
        assert has_fact(obs) and (int(obs[1]), int(obs[2])) == (key, value)
    assert not has_fact(reads[-1]) and reads[-1][-1] == vocab.QUERY
    assert [has_fact(o) for o in peeks] == [True, False, False, False, False, False]  # peeks as without it
    plain_reads, _, _ = play([peekread.READ], read_payoff=0.0)
    assert [has_fact(o) for o in plain_reads] == [True, False, False, False, False, False]


def test_reread_leaves_hard_instances_without_the_fact():
    env = gymnasium.make(ID, horizon=(6, 6), hard_frac=1.0, read_payoff=0.0, reread=True).unwrapped
    env.reset(seed=5)
    seen = [env.step(peekread.READ)[0] for _ in range(5)]
    assert not any(has_fact(o[o != vocab.PAD]) for o in seen)


def test_the_oracle_reads_again_when_reads_restate_the_fact():
    solver = gymnasium.make(ID, read_payoff=0.0, reread=True).unwrapped.solver
    rng = np.random.default_rng(0)
    target, value = solver.keys[0], solver.values[0]
    lost = np.array([vocab.BOS, vocab.TASK, vocab.SUMMARY, vocab.PAD, vocab.PAD, vocab.ACT, peekread.PEEK,
                     vocab.OBS, 30, 31, 32])
    assert solver.oracle_act(lost, target, rng) == peekread.READ
    kept = np.array([vocab.BOS, vocab.TASK, vocab.SUMMARY, target, value, vocab.ACT, peekread.PEEK, vocab.OBS, 30])
    assert solver.oracle_act(kept, target, rng) == peekread.PEEK
    without = gymnasium.make(ID, read_payoff=0.0).unwrapped.solver
    assert without.oracle_act(lost, target, rng) == peekread.PEEK  # a read could not show it
