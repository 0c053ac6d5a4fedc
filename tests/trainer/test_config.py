"""Run configs: layering, recipes, overrides, and bad input naming the key path."""

from __future__ import annotations

import pytest

from simlab.config import apply_overrides, flatten, load, parse_overrides, resolve
from simlab.errors import ConfigError
from simlab.recipes import RECIPES
from simlab.train.identity import base_key, base_seed


@pytest.mark.parametrize("recipe", RECIPES.names())
def test_every_recipe_resolves_and_round_trips(recipe):
    cfg = resolve({"train": {"recipe": recipe}})
    assert resolve(cfg.to_nested()) == cfg
    flat = flatten(cfg)
    assert flat["train.recipe"] == recipe
    assert all(isinstance(v, (int, float, str, bool)) for v in flat.values())


def test_layering_run_beats_recipe_beats_preset():
    cfg = resolve({"task": {"preset": "keyrecall-tiny"}, "train": {"recipe": "compactionrl"}})
    assert cfg.harness.trigger == "budget" and cfg.harness.tail_steps == 2  # recipe
    assert cfg.harness.window == 96  # preset
    assert cfg.train.algorithm == "ppo" and cfg.train.critic == "separate" and cfg.train.group_size == 1
    assert cfg.train.response_cap == 96 // 6  # the recipe's W/6 translation
    cfg = resolve({"train": {"recipe": "compactionrl"}, "harness": {"tail_steps": 1, "window": 120}})
    assert cfg.harness.tail_steps == 1 and cfg.train.response_cap == 120 // 6


def test_a_preset_carries_policy_base_and_train_defaults_below_recipe_and_run():
    cfg = resolve({"task": {"preset": "keyrecall-mini"}, "train": {"recipe": "compactionrl"}})
    assert (cfg.policy.n_layer, cfg.policy.d_model, cfg.base.steps) == (2, 64, 80)  # preset
    assert cfg.train.lr == 6e-4 and cfg.train.prompts == 32  # preset, the recipe sets neither
    assert cfg.train.group_size == 1  # the recipe wins over the preset
    cfg = resolve({"task": {"preset": "keyrecall-mini"}, "policy": {"n_layer": 3}, "base": {"steps": 5},
                   "train": {"lr": 1e-3}})
    assert (cfg.policy.n_layer, cfg.policy.d_model, cfg.base.steps, cfg.train.lr) == (3, 64, 5, 1e-3)
    assert resolve({}).policy.n_layer == 3  # presets without such defaults keep the section defaults


def test_supo_threshold_leaves_room_for_the_summary():
    cfg = resolve({"train": {"recipe": "supo"}})
    assert cfg.harness.threshold + 2 + cfg.harness.summary_tokens <= cfg.harness.window
    big = resolve({"train": {"recipe": "supo"}, "harness": {"window": 400}})
    assert big.harness.frac == 0.95


def test_algorithm_follows_the_estimator():
    assert resolve({"train": {"estimator": "gae_concat"}}).train.algorithm == "ppo"
    assert resolve({"train": {"estimator": "trajectory_group"}}).train.algorithm == "grpo"


def test_grpo_baseline_matches_effective_horizon():
    supo = resolve({"train": {"recipe": "supo"}})
    grpo = resolve({"train": {"recipe": "grpo"}})
    preset = resolve({}).harness
    assert grpo.harness.trigger == "none"
    assert grpo.harness.window == int(0.8 * preset.window) * (preset.max_compactions + 1)
    assert supo.policy.max_len < grpo.policy.max_len


def test_overrides_parse_like_toml():
    assert parse_overrides(["train.lr=1e-3", "train.overlong_mask=false", "train.estimator=gae_concat",
                            "task.horizon=[10, 12]", "seed=3"]) == {
        "train.lr": 1e-3, "train.overlong_mask": False, "train.estimator": "gae_concat",
        "task.horizon": [10, 12], "seed": 3}
    cfg = resolve(apply_overrides({}, parse_overrides(["task.horizon=[10, 12]"])))
    assert cfg.task.horizon == (10, 12)


@pytest.mark.parametrize(
    ("nested", "match"),
    [
        ({"nope": 1}, r"`nope` is not a setting"),
        ({"train": {"nope": 1}}, r"`train.nope` is not a setting"),
        ({"train": {"recipe": "ppo2"}}, r"`train.recipe='ppo2'` is invalid; choose one of 'supo'"),
        ({"train": {"estimator": "grpo"}}, r"`train.estimator='grpo'` is invalid; choose one of 'rollout_group'"),
        ({"train": {"normaliser": "mean"}}, r"`train.normaliser='mean'` is invalid"),
        ({"train": {"eps_low": 0}}, r"`train.eps_low=0` is invalid; choose a finite value > 0"),
        ({"train": {"eps_high": -0.1}}, r"`train.eps_high=-0.1` is invalid"),
        ({"train": {"group_size": 0}}, r"`train.group_size=0` is invalid; choose an integer >= 1"),
        ({"train": {"lam": "tokens", "estimator": "gae_concat"}}, r"`train.lam='tokens'` is invalid"),
        ({"train": {"lam": 1.5, "estimator": "gae_concat"}}, r"`train.lam=1.5` is invalid"),
        ({"train": {"estimator": "gae_concat", "critic": "none"}}, r"`train.critic='none'` is invalid"),
        ({"train": {"algorithm": "grpo", "estimator": "gae_concat"}}, r"choose a group estimator"),
        ({"train": {"overlong_mask": "yes"}}, r"`train.overlong_mask='yes'` is invalid; choose true or false"),
        ({"task": {"preset": "nope"}}, r"`task.preset='nope'` is invalid"),
        ({"task": {"noise": 2.0}}, r"`task.noise=2.0` is invalid"),
        ({"harness": {"frac": 0}}, r"`harness.frac=0` is invalid"),
        ({"harness": {"window": 16, "t_comp": 3}}, r"`harness.window=16` is invalid; it cannot hold the prompt"),
        ({"harness": {"summariser": "gpt"}}, r"`harness.summariser='gpt'` is invalid"),
        ({"harness": {"summariser_quality": 1.5}},
         r"`harness.summariser_quality=1.5` is invalid; choose a value in \[0, 1\]"),
        ({"policy": {"vocab_size": 99}}, r"`policy.vocab_size=99` is invalid; it is set by the task"),
        ({"policy": {"n_head": 5}}, r"`policy.n_head=5` is invalid"),
        ({"policy": {"max_len": 50}}, r"`policy.max_len=50` is invalid"),
        ({"base": {"teacher": "human"}}, r"`base.teacher='human'` is invalid"),
        ({"base": {"seed": "each"}},
         r"`base.seed='each'` is invalid; choose an integer >= 0 \(at most 2\*\*32 - 1\) or 'run'"),
        ({"base": {"seed": -2}}, r"`base.seed=-2` is invalid; choose an integer >= 0"),
        ({"base": {"minibatch_tokens": 1.5}}, r"`base.minibatch_tokens=1.5` is invalid; choose an integer >= 0"),
        ({"train": {"minibatch_tokens": -1}}, r"`train.minibatch_tokens=-1` is invalid; choose an integer >= 0"),
        ({"train": {"length_buckets": "yes"}}, r"`train.length_buckets='yes'` is invalid; choose true or false"),
        ({"eval": {"episodes": 0}}, r"`eval.episodes=0` is invalid"),
        ({"eval": {"seed": "each"}},
         r"`eval.seed='each'` is invalid; choose an integer >= 1 \(at most 2\*\*32 - 1\) or 'run'"),
        ({"eval": {"seed": 10}}, r"`eval.seed=10` is invalid; held-out seeds start above the training instances"),
        ({"seed": -1}, r"`seed=-1` is invalid"),
        ({"device": "tpu"}, r"`device='tpu'` is invalid"),
        ({"train": 3}, r"`train=3` is invalid; it must be a table"),
    ],
)
def test_bad_input_names_the_key(nested, match):
    with pytest.raises(ConfigError, match=match):
        resolve(nested)


def test_base_seed_is_shared_by_default_and_follows_the_run_when_asked():
    shared = [resolve({"seed": s}) for s in (0, 1)]
    assert base_key(shared[0]) == base_key(shared[1])  # one base model for every run seed
    own = [resolve({"seed": s, "base": {"seed": "run"}}) for s in (0, 1)]
    assert base_key(own[0]) != base_key(own[1]) and base_seed(own[1]) == 1
    assert base_key(own[0]) == base_key(shared[0])  # base seed 0 either way


def test_eval_seed_run_gives_each_seed_its_own_held_out_set():
    a, b = resolve({"seed": 0, "eval": {"seed": "run"}}), resolve({"seed": 1, "eval": {"seed": "run"}})
    assert a.eval_seed != b.eval_seed and min(a.eval_seed, b.eval_seed) >= a.train_seed_limit
    shared = resolve({"seed": 1})
    assert shared.eval_seed == shared.eval.seed == resolve({"seed": 2}).eval_seed


def test_bad_override_syntax():
    with pytest.raises(ConfigError, match="write key=value"):
        parse_overrides(["train.lr"])
    with pytest.raises(ConfigError, match="is not a key path"):
        apply_overrides({}, {"train.optim.lr": 1})


def test_load_reads_toml_and_reports_bad_files(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('seed = 4\n[train]\nrecipe = "resum"\n')
    cfg = load(path, ["train.lr=0.01"])
    assert (cfg.seed, cfg.train.recipe, cfg.train.lr, cfg.harness.summariser) == (4, "resum", 0.01, "scripted")
    path.write_text("[train\n")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load(path)
    with pytest.raises(ConfigError, match="does not exist"):
        load(tmp_path / "missing.toml")
