"""``simlab inspect`` on every preset."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from simlab.cli import app
from simlab.tasks.presets import PRESETS


@pytest.mark.parametrize("name", list(PRESETS))
def test_inspect_runs_on_every_preset(name: str) -> None:
    result = CliRunner().invoke(
        app, ["inspect", "--task", name, "--agent", "oracle", "--episodes", "24", "--json"]
    )
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    for key in (
        "success_rate",
        "segments_distribution",
        "compaction_rate",
        "overlong_rate",
        "corr_segments_reward",
        "working_context_mean",
        "working_context_max",
        "effective_horizon",
        "tokens_per_s",
    ):
        assert key in stats
    assert sum(stats["segments_distribution"].values()) == 24
    assert stats["working_context_max"] <= stats["window"]


def test_inspect_prints_a_report() -> None:
    result = CliRunner().invoke(
        app,
        [
            "inspect",
            "--task",
            "pointerchase-tiny",
            "--trigger",
            "sliding",
            "--episodes",
            "16",
            "--agent",
            "random",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "success" in result.output and "corr(segments, reward)" in result.output


def test_inspect_shows_the_gap_to_a_no_summary_run() -> None:
    result = CliRunner().invoke(
        app,
        [
            "inspect",
            "--task",
            "keyrecall-tiny",
            "--agent",
            "oracle",
            "--episodes",
            "64",
            "--vs-sliding",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["summary_gap"] > 0.4 and stats["sliding_success_rate"] < 0.2


@pytest.mark.parametrize(
    ("name", "lo", "hi"),
    [("peekread-pos", 0.3, 1.0), ("peekread-neg", -1.0, -0.3), ("peekread-zero", -0.1, 0.1)],
)
def test_peekread_presets_meet_their_within_group_bounds(name: str, lo: float, hi: float) -> None:
    """The calibration the findings stand on: K varies inside groups of G = 8 and goes with reward as the
    preset says (scripted agent, 1024 rollouts)."""
    result = CliRunner().invoke(app, ["inspect", "--task", name, "--episodes", "1024", "--json"])
    assert result.exit_code == 0, result.output
    within = json.loads(result.output)["within_group"]
    assert within["segments_sd"] >= 0.7
    assert lo <= within["corr"] <= hi


def test_inspect_rejects_a_group_size_that_does_not_divide_the_episodes() -> None:
    result = CliRunner().invoke(app, ["inspect", "--task", "peekread-pos", "--episodes", "20", "-G", "8"])
    assert result.exit_code == 2 and "`episodes=20` is invalid; choose a multiple of group_size=8" in result.output


def test_success_se_counts_each_prompt_once() -> None:
    import numpy as np

    from simlab.harness.stats import cluster_se

    # two prompts of two rollouts: group means 1 and 0 -> SD sqrt(0.5) over sqrt(2) prompts = 0.5
    assert cluster_se(np.array([1.0, 1.0, 0.0, 0.0]), np.array([0, 0, 1, 1])) == 0.5


def _checkpoint(tmp_path, preset: str = "peekread-routes-c0", **harness: object):
    """A small untrained policy saved as a run of ``preset`` would save it (with its harness in the meta)."""
    import torch

    from simlab.config import resolve
    from simlab.policy.checkpoint import save_checkpoint
    from simlab.policy.model import Policy
    from simlab.train.base import checkpoint_meta

    cfg = resolve({"task": {"preset": preset}, "harness": dict(harness),
                   "policy": {"n_layer": 1, "d_model": 16, "n_head": 2}})
    torch.manual_seed(0)
    path = tmp_path / "policy.pt"
    save_checkpoint(path, Policy(cfg.policy), meta=checkpoint_meta(cfg))
    return path, cfg


def test_inspect_plays_a_checkpoint_under_the_harness_it_was_trained_with(tmp_path) -> None:
    path, cfg = _checkpoint(tmp_path)
    args = ["inspect", "--task", "peekread-routes-c0", "--checkpoint", str(path), "--episodes", "32", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    stats = json.loads(result.output)
    assert stats["agent"] == "checkpoint" and stats["threshold"] == cfg.harness.threshold  # SUPO's L, not the preset's
    assert sum(r["share"] for r in stats["routes"].values()) == 1.0
    again = json.loads(CliRunner().invoke(app, args).output)
    assert again["success_rate"] == stats["success_rate"]  # the seed fixes the sampling too
    wider = json.loads(CliRunner().invoke(app, [*args, "--frac", "0.8"]).output)
    assert wider["threshold"] == int(0.8 * cfg.harness.window)  # the command's options win


@pytest.mark.parametrize(("extra", "needle"), [
    (["--checkpoint", "nowhere.pt"], "`checkpoint='nowhere.pt'` is invalid; choose an existing checkpoint file"),
    (["--window", "200"], "`harness.window=200` is invalid; the checkpoint's policy holds"),
    (["--summariser", "frozen"], "`harness.summariser='frozen'` is invalid; inspect plays the checkpoint alone"),
])
def test_inspect_rejects_a_bad_checkpoint_setting(tmp_path, extra: list[str], needle: str) -> None:
    path, _ = _checkpoint(tmp_path)
    args = ["inspect", "--task", "peekread-routes-c0", "--checkpoint", str(path), "--episodes", "8", *extra]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and needle in result.output, result.output
    assert result.output.count("\n") == 1


def test_inspect_rejects_a_checkpoint_of_another_vocabulary(tmp_path) -> None:
    path, _ = _checkpoint(tmp_path, "keyrecall-mini")
    result = CliRunner().invoke(app, ["inspect", "--task", "peekread-routes-c0", "--checkpoint", str(path)])
    assert result.exit_code == 2 and "`checkpoint=" in result.output and "vocab_size" in result.output
