"""``base.teach``: what the base model's demonstrations are played on, and its place in the cache key."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from simlab.cli import app
from simlab.config import RunConfig, resolve
from simlab.schema import plain
from simlab.train.rollouts import collect

ROUTES = {"task": {"preset": "peekread-routes-c100"}}


def old_base_key(cfg: RunConfig) -> str:
    """The base key as it was computed before ``base.teach`` and ``task.cue_reliability`` existed."""
    policy = {k: v for k, v in plain(cfg.policy).items() if k != "value_head"}
    base = {**{k: v for k, v in plain(cfg.base).items() if k not in ("cache", "teach")}, "seed": cfg.base_seed}
    task = {k: v for k, v in plain(cfg.task).items() if k != "cue_reliability"}
    payload = {"env": cfg.env_id, "task": task, "harness": cfg.base_harness_settings(),
               "policy": policy, "base": base, "v_sum": cfg.harness.v_sum}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()[:16]


@pytest.mark.parametrize("preset", ["keyrecall-tiny", "keyrecall-mini", "peekread-pos"])
def test_the_default_keeps_the_base_models_built_before(preset: str) -> None:
    cfg = resolve({"task": {"preset": preset}})
    assert cfg.base.teach == "task" and cfg.base_task() is cfg.task
    assert cfg.base_key() == old_base_key(cfg)


def test_full_information_is_its_own_base_model_and_shared_across_the_coupling() -> None:
    full = resolve(ROUTES)
    assert full.base.teach == "full"  # the routes presets teach on full information
    real = resolve({**ROUTES, "base": {"teach": "task"}})
    assert full.base_key() != real.base_key()
    control = resolve({"task": {"preset": "peekread-routes-control"}})
    assert control.task != full.task and control.base_key() == full.base_key()  # one base model per seed
    assert resolve({**ROUTES, "task": {**ROUTES["task"], "burst_prob": 0.3}}).base_key() != full.base_key()
    assert full.base_task() == full.task.full_information()
    assert (full.base_task().read_payoff, full.base_task().coupling) == (0.0, 0.0)


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
