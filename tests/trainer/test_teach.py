"""``base.teach``: what the base model's demonstrations are played on, and its place in the cache key."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from simlab.cli import app
from simlab.config import RunConfig, resolve
from simlab.train.identity import base_key, base_task
from simlab.train.rollouts import collect

ROUTES = {"task": {"preset": "peekread-routes-c100"}}


KEYS_BEFORE = {"keyrecall-tiny": "b3b1431fd693ca8d", "keyrecall-mini": "6426b53d1a3cac27",
               "peekread-pos": "b1ebf7bf95a838eb"}
"""``base_key()`` of the default config of these presets at f57bde1, before ``task.cue_reliability``,
``task.cue_at`` and ``harness.summary_budget`` existed (``base.teach`` came earlier, its default keyless)."""


@pytest.mark.parametrize("preset", ["keyrecall-tiny", "keyrecall-mini", "peekread-pos"])
def test_the_default_keeps_the_base_models_built_before(preset: str) -> None:
    cfg = resolve({"task": {"preset": preset}})
    assert cfg.base.teach == "task" and base_task(cfg) is cfg.task
    assert base_key(cfg) == KEYS_BEFORE[preset]


def test_full_information_is_its_own_base_model_and_shared_across_the_coupling() -> None:
    full = resolve(ROUTES)
    assert full.base.teach == "full"  # the routes presets teach on full information
    real = resolve({**ROUTES, "base": {"teach": "task"}})
    assert base_key(full) != base_key(real)
    control = resolve({"task": {"preset": "peekread-routes-control"}})
    assert control.task != full.task and base_key(control) == base_key(full)  # one base model per seed
    assert base_key(resolve({**ROUTES, "task": {**ROUTES["task"], "burst_prob": 0.3}})) != base_key(full)
    assert base_task(full) == full.task.full_information()
    assert (base_task(full).read_payoff, base_task(full).coupling) == (0.0, 0.0)


def test_every_cue_dose_shares_one_base_model_taught_on_the_reliable_cue() -> None:
    """Under ``base.teach = "full"`` the cue's doses (keyrecall-mark at rho 0, 0.5, 1) clone one base per seed,
    taught where the cue always names the asked fact; under ``task`` each dose has its own."""
    def cfg(rho: float, teach: str = "full") -> RunConfig:
        return resolve({"task": {"preset": "keyrecall-mark", "cue_reliability": rho},
                        "base": {"teacher": "cued", "quality": 0.8, "teach": teach}})
    assert len({base_key(cfg(rho)) for rho in (0.0, 0.5, 1.0)}) == 1
    assert len({base_key(cfg(rho, "task")) for rho in (0.0, 0.5, 1.0)}) == 3
    assert base_task(cfg(0.0)).cue_reliability == 1.0 and cfg(0.0).task.cue_reliability == 0.0
    assert resolve({"task": {"preset": "keyrecall-duo"}}).task.full_information().cue_reliability is None


def test_a_teacher_plays_the_teaching_task_and_the_policy_the_real_one() -> None:
    cfg = resolve({**ROUTES, "task": {**ROUTES["task"], "burst_prob": 1.0}})
    _, env, _ = collect(cfg, None, harness=cfg.harness, prompts=4, group_size=1, seed=3, teacher="scripted")
    assert env.unwrapped.config == cfg.task.full_information()


def test_a_bad_teaching_task_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train", "--set", "base.teach=half", "--store", str(tmp_path / "store"),
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert "`base.teach='half'` is invalid; choose one of 'task', 'full'" in result.output
    assert not any(tmp_path.iterdir())


# ------------------------------------------------------------------------- base.compact_hazard
AUTOCOMPACT = {"task": {"preset": "keyrecall-mark"}, "train": {"recipe": "autocompact"},
               "base": {"teacher": "cued", "quality": 0.8}}


def test_an_early_compacting_teacher_is_its_own_base_model_and_the_default_keeps_the_key() -> None:
    plain_teacher = resolve(AUTOCOMPACT)
    early = resolve({**AUTOCOMPACT, "base": {**AUTOCOMPACT["base"], "compact_hazard": 0.15}})
    assert plain_teacher.base.compact_hazard == 0.0
    assert base_key(early) != base_key(plain_teacher)
    for preset in KEYS_BEFORE:  # the setting at its default leaves every earlier key as it was
        assert base_key(resolve({"task": {"preset": preset}})) == KEYS_BEFORE[preset]


def _segment_counts(hazard: float) -> np.ndarray:
    cfg = resolve({**AUTOCOMPACT, "base": {**AUTOCOMPACT["base"], "compact_hazard": hazard}})
    rb, _, _ = collect(cfg, None, harness=cfg.harness, prompts=32, group_size=4, seed=3, teacher="cued")
    return np.array([r.compactions + 1 for r in rb.rollouts]).reshape(32, 4)


def test_an_early_compacting_teacher_compacts_more_and_at_varied_points_within_a_group() -> None:
    plain_k, early_k = _segment_counts(0.0), _segment_counts(0.3)
    assert early_k.mean() > plain_k.mean() + 0.5
    assert early_k.std(axis=1).mean() > 2 * plain_k.std(axis=1).mean() + 0.2  # K now varies inside a group
    assert np.array_equal(_segment_counts(0.0), plain_k)  # the default draws nothing: the same stream


def test_an_early_compacting_teacher_needs_the_policy_trigger(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["train", "--set", "base.compact_hazard=0.2", "--store", str(tmp_path / "s"),
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 2 and not (tmp_path / "s").exists() and not (tmp_path / "run").exists()
    line = result.output.strip()
    assert "\n" not in line and "base.compact_hazard=0.2" in line and "'policy' trigger" in line
