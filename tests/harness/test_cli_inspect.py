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
