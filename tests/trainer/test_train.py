"""Training runs end to end: every recipe, determinism, divergence, checkpoints, the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest
import torch

from simlab import names
from simlab.config import resolve
from simlab.errors import ConfigError, TrainingDiverged
from simlab.policy.checkpoint import load_checkpoint, save_checkpoint
from simlab.policy.model import Policy
from simlab.recipes import RECIPES
from simlab.sinks import JsonlSink, read_metrics
from simlab.train import train
from simlab.train.base import base_checkpoint
from simlab.train.identity import base_key

from .conftest import tiny


def run(tmp_path, nested, name="run"):
    cfg = resolve(nested)
    sink = JsonlSink(tmp_path / name)
    final = train(cfg, sink, store=tmp_path / "store", out_dir=tmp_path / name)
    sink.close()
    return cfg, final, read_metrics(tmp_path / name)


@pytest.mark.parametrize("recipe", RECIPES.names())
def test_every_recipe_trains_and_evaluates(tmp_path, recipe):
    extra = {"value_pretrain_steps": 1} if recipe == "compactionrl" else {}
    cfg, final, rows = run(tmp_path, tiny(train={"recipe": recipe, **extra}))
    assert {"eval/compacted/success", "eval/single_window/success"} <= set(final)
    steps = [r for r in rows if "train/success" in r]
    assert len(steps) == cfg.train.steps
    for r in steps:
        assert r["perf/optimised_tokens"] > 0
        assert 0.0 <= r["health/compaction_rate"] <= 1.0
        if cfg.train.algorithm == "ppo":
            assert "loss/value" in r and "adv_error/pre_final/rel_l2" in r
        fail, success, tied = (r[names.metric(names.TRAIN, k)] for k in names.GROUPS)
        assert math.isnan(tied) if cfg.train.group_size == 1 else tied == pytest.approx(fail + success)  # 0/1 rewards
    # a group share is a training step's: an evaluation plays groups of one rollout
    assert not [k for r in rows for k in r if k.endswith(names.GROUPS) and not k.startswith(names.TRAIN + "/")
                and not k.startswith(names.PRETRAIN)]
    _, meta = load_checkpoint(tmp_path / "run" / "policy.pt")
    assert meta["v_sum"] == cfg.harness.v_sum and meta["trigger"] == cfg.harness.trigger


def strip_timing(rows):
    return [{k: v for k, v in r.items() if "perf/" not in k or k.endswith("optimised_tokens")} for r in rows]


def test_same_seed_same_metrics_on_cpu(tmp_path):
    nested = tiny(train={"recipe": "compactionrl", "value_pretrain_steps": 1})
    _, a, rows_a = run(tmp_path, nested, "a")
    _, b, rows_b = run(tmp_path, nested, "b")
    assert a == b
    assert strip_timing(rows_a) == strip_timing(rows_b)
    _, _, rows_c = run(tmp_path, {**nested, "seed": 1}, "c")
    assert strip_timing(rows_c) != strip_timing(rows_a)


def test_base_checkpoint_is_cached_by_config(tmp_path):
    cfg = resolve(tiny())
    path = base_checkpoint(cfg, tmp_path)
    stamp = path.stat().st_mtime_ns
    assert base_checkpoint(resolve(tiny(train={"recipe": "resum"})), tmp_path) == path  # same base
    assert path.stat().st_mtime_ns == stamp
    other = base_checkpoint(resolve(tiny(base={"quality": 0.3})), tmp_path)
    assert other != path


def test_divergence_stops_cleanly_without_a_checkpoint(tmp_path):
    cfg = resolve(tiny(train={"lr": 1e30, "steps": 3}))
    sink = JsonlSink(tmp_path / "run")
    with pytest.raises(TrainingDiverged, match=r"non-finite|is nan|is inf"):
        train(cfg, sink, store=tmp_path / "store", out_dir=tmp_path / "run")
    assert not (tmp_path / "run" / "policy.pt").exists()
    base = base_checkpoint(cfg, tmp_path / "store")
    policy, _ = load_checkpoint(base)
    assert all(torch.isfinite(p).all() for p in policy.parameters())  # the cached base is untouched


def test_checkpoint_from_another_vocabulary_is_refused(tmp_path):
    cfg = resolve(tiny())
    other = resolve(tiny(task={"vocab_size": 40}))
    path = tmp_path / "store" / "base" / f"{cfg.preset}-{base_key(cfg)}.pt"
    path.parent.mkdir(parents=True)
    save_checkpoint(path, Policy(other.policy), meta={"v_sum": "v1"})
    with pytest.raises(ValueError, match="vocab_size"):
        train(cfg, JsonlSink(tmp_path / "run"), store=tmp_path / "store")


def cli(*args, cwd=None, env=None):
    return subprocess.run([sys.executable, "-m", "simlab.cli", *args], capture_output=True, text=True,
                          timeout=600, cwd=cwd, env=env)


def test_cli_train_writes_a_run_folder(tmp_path):
    cfg_path = tmp_path / "run.toml"
    lines = []
    for section, values in tiny().items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    cfg_path.write_text("\n".join(lines) + "\n")
    out = cli("train", str(cfg_path), "--set", "train.steps=1", "--out", str(tmp_path / "r"),
              "--store", str(tmp_path / "store"))
    assert out.returncode == 0, out.stderr
    assert "eval/compacted/success" in out.stdout
    status = json.loads((tmp_path / "r" / "status.json").read_text())
    assert status["status"] == "FINISHED"
    params = json.loads((tmp_path / "r" / "params.json").read_text())
    assert params["train.steps"] == 1
    # an existing run folder is never overwritten
    again = cli("train", str(cfg_path), "--out", str(tmp_path / "r"), "--store", str(tmp_path / "store"))
    assert again.returncode == 2 and "not empty" in again.stderr
    assert json.loads((tmp_path / "r" / "params.json").read_text())["train.steps"] == 1


def test_cli_train_default_store_follows_simlab_home(tmp_path):
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    cfg_path = tmp_path / "run.toml"
    cfg_path.write_text("".join(f"[{section}]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in values.items())
                                for section, values in tiny().items()))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"SIMLAB_HOME": str(home)}
    out = cli("train", str(cfg_path), "--set", "train.steps=0", cwd=work, env=env)
    assert out.returncode == 0, out.stderr
    (folder,) = (home / "mlruns" / "runs").iterdir()  # the run folder and the base cache under $SIMLAB_HOME
    assert f"run folder: {folder}" in out.stdout and (folder / "status.json").is_file()
    assert list(work.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--set", "train.recipe=ppo2"], "`train.recipe='ppo2'` is invalid"),
        (["--set", "train.eps_high=0"], "`train.eps_high=0` is invalid"),
        (["--set", "train.group_size=0"], "`train.group_size=0` is invalid"),
        (["--set", "train.minibatch_tokens=-1"], "`train.minibatch_tokens=-1` is invalid; choose an integer >= 0"),
        (["--set", "base.minibatch_tokens=big"], "`base.minibatch_tokens='big'` is invalid"),
        (["--set", "harness.summariser=gpt"], "`harness.summariser='gpt'` is invalid"),
        (["--set", "harness.window=16", "--set", "harness.t_comp=3"], "`harness.window=16` is invalid"),
        (["missing.toml"], "does not exist"),
    ],
)
def test_cli_bad_input_exits_2(tmp_path, args, match):
    out = cli("train", *args, "--store", str(tmp_path / "store"))
    assert out.returncode == 2
    assert match in out.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("summariser", ["frozen", "scripted", "oracle", "none"])
def test_summariser_modes(tmp_path, summariser):
    cfg, _, rows = run(tmp_path, tiny(train={"recipe": "resum", "steps": 1}, harness={"summariser": summariser}))
    assert cfg.harness.summariser == summariser
    step = next(r for r in rows if "train/success" in r)
    if summariser == "none":
        return
    # a frozen summariser's tokens are context for the policy: only actions and answers are optimised
    assert step["perf/optimised_tokens"] > 0


def test_summariser_registry_names_match_the_harness():
    from simlab.summarisers import SUMMARISERS

    for name in SUMMARISERS:
        resolve(tiny(harness={"summariser": name}))
    with pytest.raises(ConfigError, match=r"`harness.summariser='gpt'` is invalid; choose 'self', 'none', 'frozen'"):
        resolve(tiny(harness={"summariser": "gpt"}))


def test_every_summariser_the_harness_accepts_builds(tmp_path):
    """The other direction: each name the config lets through (the modes and every reference agent,
    ``random`` included) has a factory that builds, so a run never fails on it after writing files."""
    from simlab.harness.agents import AGENTS
    from simlab.summarisers import summariser_for
    from simlab.train.rollouts import make_env

    for name in ("self", "none", *AGENTS.names()):
        # the cue agents play a task with a cue (elsewhere the config refuses them: test_summaries.py)
        cue = {"cue_reliability": 0.5, "num_facts": 2, "hard_frac": 0.0}
        task = {"task": cue} if name in ("cued", "any_fact") else {}
        cfg = resolve(tiny(harness={"summariser": name}, **task))
        summariser_for(name)(cfg, make_env(cfg, 2), seed=0, base_path=None)


def test_credit_grid_lands_on_each_segments_optimised_tokens(tmp_path):
    """The k-th optimised token of a segment row gets column k of the credit layer's grid."""
    import numpy as np

    from simlab.train.rollouts import collect
    from simlab.train.tokens import TokenBatch, from_token_grid, to_token_grid

    cfg = resolve(tiny())
    rb, _, _ = collect(cfg, None, harness=cfg.harness, prompts=4, group_size=1, seed=3, teacher="scripted")
    tb = TokenBatch.from_rollouts(rb, torch.device("cpu")).pad_rows(len(rb.segments) + 3)
    batch = rb.batch
    grid = np.zeros(batch.shape)
    for s, n in enumerate(batch.seg_tokens):
        grid[s, :n] = 1000 * s + np.arange(n)
    out = to_token_grid(grid, batch, tb)
    for s, seg in enumerate(rb.segments):
        positions = np.flatnonzero(seg.optimised)
        assert out[s, positions].tolist() == (1000 * s + np.arange(positions.size)).tolist()
        assert out[s].count_nonzero() <= positions.size
    assert not out[len(rb.segments):].any()  # dummy rows stay zero
    np.testing.assert_array_equal(from_token_grid(out, batch, tb), grid)  # and back


def test_train_without_a_store_caches_the_base_model_under_simlab_home(tmp_path, monkeypatch):
    """A library caller that passes no store gets the CLI's local store, not ``./mlruns`` of the cwd."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("SIMLAB_HOME", str(home))
    monkeypatch.chdir(work)
    train(resolve(tiny(train={"steps": 0})), JsonlSink(tmp_path / "m.jsonl"))
    assert len(list((home / "mlruns" / "base").glob("*.pt"))) == 1
    assert list(work.iterdir()) == []
