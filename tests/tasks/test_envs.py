"""The Gymnasium side of every task: check_env, make_vec, batched == single, the episode protocol."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import VectorEnv

from simlab import tasks
from simlab.tasks import vocab
from simlab.tasks.config import ConfigError, KeyRecallConfig, PointerChaseConfig
from simlab.tasks.presets import PRESETS

SMALL = {"horizon": (8, 10), "tail_prob": 0.2, "tail_tokens": 12, "noise": 0.1, "compaction_reward_corr": 0.5}


@pytest.mark.parametrize("env_id", tasks.ENV_IDS)
def test_check_env_passes(env_id: str) -> None:
    check_env(gymnasium.make(env_id, **SMALL).unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", tasks.ENV_IDS)
def test_make_vec_uses_the_native_vector_env(env_id: str) -> None:
    env = gymnasium.make_vec(env_id, num_envs=3)
    assert isinstance(env, VectorEnv)
    assert type(env).__name__.endswith("VectorEnv") and type(env).__module__ == "simlab.tasks.envs"
    obs, _ = env.reset(seed=0)
    assert obs.shape == (3, *env.single_observation_space.shape)


@pytest.mark.parametrize("env_id", tasks.ENV_IDS)
@pytest.mark.parametrize("n", [5, 40])
def test_batched_env_equals_single_envs_over_several_episodes(env_id: str, n: int) -> None:
    # n = 40 with short episodes: the vector env's bulk-drawn next episodes run stale and are redrawn
    seed, steps = 11, 40
    kw = SMALL if n == 5 else {**SMALL, "horizon": (2, 9), "num_facts": 1} if "Key" in env_id else {
        **SMALL, "horizon": (2, 9)}
    vec = gymnasium.make_vec(env_id, num_envs=n, **kw)
    vec.refill_share = 1.0 if n == 40 else 0.125  # 1.0: envs often reset on a stale buffer
    singles = [gymnasium.make(env_id, **kw).unwrapped for _ in range(n)]
    rng = np.random.default_rng(0)
    vobs, _ = vec.reset(seed=seed)
    sobs = [e.reset(seed=seed + i)[0] for i, e in enumerate(singles)]
    np.testing.assert_array_equal(vobs, np.stack(sobs))
    act = vec.metadata["act_tokens"]
    ends = 0
    restart = np.zeros(n, dtype=bool)
    for _ in range(steps):
        # mostly sensible actions so that some episodes are won, plus random ones
        actions = np.where(rng.random(n) < 0.5, rng.choice(act, n), rng.integers(0, 48, n))
        vobs, vrew, vterm, vtrunc, _ = vec.step(actions)
        for i, e in enumerate(singles):
            if restart[i]:  # NEXT_STEP autoreset: this step is the reset
                o, r, term = e.reset()[0], 0.0, False
            else:
                o, r, term, _, _ = e.step(int(actions[i]))
            np.testing.assert_array_equal(vobs[i], o)
            assert vrew[i] == r and vterm[i] == term and not vtrunc[i]
        restart = vterm.copy()
        ends += int(vterm.sum())
    assert ends >= n  # every env finished at least one episode inside the window


@pytest.mark.parametrize("env_id", tasks.ENV_IDS)
def test_episode_follows_the_token_protocol(env_id: str) -> None:
    env = gymnasium.make(env_id, horizon=(8, 8), hard_frac=0.0).unwrapped
    obs, _ = env.reset(seed=3)
    assert obs[0] == vocab.TASK and set(obs.tolist()) <= set(range(env.config.vocab_size))
    for t in range(8):
        obs, r, term, trunc, _ = env.step(
            int(env.instances.expected[0, t]) if env.instances.expected[0, t] >= 0 else vocab.NEXT
        )
        assert r == 0 and not term and not trunc
        assert (obs[obs != vocab.PAD][-1] == vocab.QUERY) == (t == 7)
    obs, r, term, _, _ = env.step(int(env.instances.answer[0]))
    assert term and r == 1.0 and not obs.any()


def test_pointerchase_wrong_move_is_fatal() -> None:
    env = gymnasium.make("simlab/PointerChase-v0", horizon=(5, 5), hard_frac=0.0).unwrapped
    env.reset(seed=1)
    exp = env.instances.expected[0]
    env.step(int(exp[0]))
    env.step(
        int(vocab.FIRST_CONTENT + (exp[1] - vocab.FIRST_CONTENT + 1) % env.config.num_nodes)
    )  # off track
    for t in range(2, 5):
        env.step(int(exp[t]))
    _, r, term, _, _ = env.step(int(env.instances.answer[0]))
    assert term and r == 0.0


@pytest.mark.parametrize("env_id", tasks.ENV_IDS)
def test_hard_instances_withhold_the_decisive_information(env_id: str) -> None:
    env = gymnasium.make_vec(env_id, num_envs=64, hard_frac=1.0, horizon=(8, 8))
    env.reset(seed=0)
    inst = env.instances
    if env_id.endswith("KeyRecall-v0"):
        # the queried key never appears after a FACT marker
        facts = inst.obs[:, :, :-1] == vocab.FACT
        shown = (facts & (inst.obs[:, :, 1:] == inst.target[:, None, None])).any(axis=(1, 2))
        assert not shown.any()
    else:
        # some table lacks a LINK from the true position
        nxt = inst.expected
        pos = np.concatenate([inst.prompt[:, 2:3], nxt[:, :-1]], axis=1)
        links = inst.obs[:, :-1, 1:7].reshape(64, 7, 2, 3)
        has = ((links[..., 0] == vocab.LINK) & (links[..., 1] == pos[:, 1:8, None])).any(axis=2)
        assert (~has).any(axis=1).all()


def test_action_outside_the_action_space_is_rejected() -> None:
    env = gymnasium.make("simlab/KeyRecall-v0").unwrapped
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"`action=48` is invalid; choose an integer in \[0, 48\)"):
        env.step(48)
    vec = gymnasium.make_vec("simlab/KeyRecall-v0", num_envs=2)
    vec.reset(seed=0)
    with pytest.raises(ValueError, match="action"):
        vec.step(np.array([0, -1]))


@pytest.mark.parametrize("value", [-1.01, 1.5, float("nan")])
def test_corr_knob_outside_range_is_rejected(value: float) -> None:
    with pytest.raises(
        ConfigError, match=r"`task.compaction_reward_corr=.*` is invalid; choose a value in \[-1, 1\]"
    ):
        gymnasium.make("simlab/KeyRecall-v0", compaction_reward_corr=value)


@pytest.mark.parametrize(
    ("cls", "settings", "key"),
    [
        (KeyRecallConfig, {"noise": 2.0}, "task.noise"),
        (KeyRecallConfig, {"horizon": (10, 5)}, "task.horizon"),
        (KeyRecallConfig, {"vocab_size": 20}, "task.vocab_size"),
        (KeyRecallConfig, {"num_facts": 0}, "task.num_facts"),
        (PointerChaseConfig, {"obs_tokens": (3, 4)}, "task.obs_tokens"),
        (KeyRecallConfig, {"tail_prob": -0.1}, "task.tail_prob"),
    ],
)
def test_bad_task_configs_name_the_field(cls: type, settings: dict, key: str) -> None:
    with pytest.raises(ConfigError, match=f"`{key}"):  # checked when the config is built
        cls(**settings)


def test_unknown_override_lists_fields() -> None:
    with pytest.raises(ConfigError, match="num_facts"):
        gymnasium.make("simlab/KeyRecall-v0", nope=1)


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_builds(name: str) -> None:
    p = PRESETS[name]
    p.task.recheck()
    env = gymnasium.make_vec(p.env_id, num_envs=2, config=p.task)
    obs, _ = env.reset(seed=0)
    assert obs.shape[0] == 2


def test_describe_names_every_marker_an_id_stands_for() -> None:
    """Two markers share an id where no task uses both (CUE and LINK, END_SUMMARY and PAD): a rendering
    names both, never one of them as if it were the only meaning."""
    ids = {name: getattr(vocab, name) for name in dir(vocab) if name.isupper()}
    markers = {name: token for name, token in ids.items() if isinstance(token, int) and token < vocab.FIRST_CONTENT}
    assert {"CUE", "LINK", "END_SUMMARY", "PAD", "TASK"} <= set(markers)
    for name, token in markers.items():
        assert name in vocab.describe([token]).split("/"), (name, vocab.describe([token]))
    assert vocab.describe([vocab.CUE, vocab.FIRST_CONTENT + 3, vocab.END_SUMMARY]) == "LINK/CUE c3 PAD/END_SUMMARY"


def test_without_distractors_a_key_id_stands_only_in_facts_the_cue_and_the_query() -> None:
    from simlab.tasks.keyrecall import generate, key_tokens

    clean = PRESETS["keyrecall-cue-clean"].task
    old = PRESETS["keyrecall-cue"].task
    assert isinstance(clean, KeyRecallConfig) and isinstance(old, KeyRecallConfig)
    assert old.replace(distractors=False) == clean  # the same task otherwise
    keys = np.arange(200, dtype=np.uint64)
    k0, k1 = key_tokens(clean)
    inst, before = generate(keys, clean), generate(keys, old)
    assert (inst.prompt[:, 0] == vocab.TASK).all() and (inst.prompt[:, 2:] == vocab.PAD).all()  # TASK, the cue
    assert ((inst.prompt[:, 1] >= k0) & (inst.prompt[:, 1] < k1)).all()
    is_key = (inst.obs >= k0) & (inst.obs < k1)
    after_mark = np.zeros_like(is_key)
    after_mark[:, :, 1:] = np.isin(inst.obs[:, :, :-1], (vocab.FACT, vocab.CUE))
    before_query = np.zeros_like(is_key)
    before_query[:, :, :-1] = inst.obs[:, :, 1:] == vocab.QUERY
    assert not (is_key & ~after_mark & ~before_query).any()
    old_keys = (before.obs >= k0) & (before.obs < k1)
    assert (old_keys.sum() > is_key.sum()) and (before.prompt[:, 1] == vocab.FIRST_CONTENT + old.num_facts).all()
    # the facts, the query and the answers are the draws of the task with distractors
    assert (inst.answer == before.answer).all() and (inst.target == before.target).all()
    assert (inst.obs == vocab.PAD).sum() == (before.obs == vocab.PAD).sum()
