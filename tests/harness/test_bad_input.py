"""Every bad input the issue lists gets an error naming the field and the allowed range."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from typer.testing import CliRunner

from simlab.cli import app
from simlab.harness import Generation, HarnessConfig, Request, make_agent, run_rollouts
from simlab.registry import UnknownNameError
from simlab.tasks.config import ConfigError

from .helpers import KR, run


def test_window_too_small_for_prompt_summary_and_one_step() -> None:
    with pytest.raises(
        ConfigError, match=r"`harness.window=16` is invalid; it cannot hold the prompt .* >= \d+"
    ):
        run(window=16, summary_tokens=6)


def test_threshold_too_small_for_prompt_summary_and_one_step() -> None:
    with pytest.raises(ConfigError, match=r"`harness.frac=0.1` is invalid"):
        run(window=96, frac=0.1)


@pytest.mark.parametrize("frac", [0.0, -0.2, 1.5, float("inf")])
def test_frac_outside_zero_one(frac: float) -> None:
    with pytest.raises(ConfigError, match=r"`harness.frac=.*` is invalid; choose a value in \(0, 1\]"):
        HarnessConfig(frac=frac)


@pytest.mark.parametrize("field", ["max_compactions", "tail_steps", "summary_tokens", "max_steps"])
def test_negative_S_k_m_H(field: str) -> None:
    with pytest.raises(ConfigError, match=rf"`harness.{field}=-1` is invalid; choose an integer >= \d"):
        HarnessConfig(**{field: -1})


def test_unknown_trigger_lists_the_valid_ones() -> None:
    with pytest.raises(
        UnknownNameError, match=r"`harness.trigger='react'` is invalid; choose one of 'threshold'.*'every_step'"
    ):
        HarnessConfig(trigger="react")


def test_unknown_agent_lists_the_valid_ones() -> None:
    env = gymnasium.make_vec(KR, num_envs=2)
    with pytest.raises(
        UnknownNameError, match=r"`agent='gpt'` is invalid; choose one of 'oracle', 'scripted', 'random'"
    ):
        make_agent("gpt", env)
    with pytest.raises(ConfigError, match=r"`harness.summariser='gpt'` is invalid"):
        HarnessConfig(summariser="gpt")


def test_agent_quality_outside_zero_one() -> None:
    env = gymnasium.make_vec(KR, num_envs=2)
    with pytest.raises(ConfigError, match=r"`agent.quality=1.5` is invalid; choose a value in \[0, 1\]"):
        make_agent("scripted", env, quality=1.5)


class OutOfVocab:
    def generate(self, request: Request) -> Generation:
        return Generation(tokens=np.full((len(request.contexts), request.num_tokens), 999, dtype=np.int64))


def test_action_outside_the_action_space_from_an_agent() -> None:
    env = gymnasium.make_vec(KR, num_envs=2)
    with pytest.raises(ValueError, match="emitted token 999 in phase ACT, which is not allowed"):
        run_rollouts(env, OutOfVocab(), HarnessConfig(window=96, summary_tokens=6))


def test_cli_bad_input_exits_2_naming_the_field() -> None:
    runner = CliRunner()
    for args, needle in [
        (["--frac", "1.5"], "`harness.frac=1.5` is invalid; choose a value in (0, 1]"),
        (["--max-compactions", "-1"], "`harness.max_compactions=-1` is invalid"),
        (["--trigger", "foo"], "`harness.trigger='foo'` is invalid"),
        (["--agent", "foo"], "`agent='foo'` is invalid"),
        (["--window", "10"], "`harness.window=10` is invalid"),
        (
            ["--set", "compaction_reward_corr=2"],
            "`task.compaction_reward_corr=2` is invalid; choose a value in [-1, 1]",
        ),
        (["--quality", "-0.5"], "`agent.quality=-0.5` is invalid"),
    ]:
        result = runner.invoke(app, ["inspect", "--task", "keyrecall-tiny", "--episodes", "8", *args])
        assert result.exit_code == 2, (args, result.output)
        assert needle in result.output, (args, result.output)
    for args, needle in [
        (["--set", "burst_prob=2"], "`task.burst_prob=2` is invalid; choose a value in [0, 1]"),
        (["--set", "coupling=-1.5"], "`task.coupling=-1.5` is invalid; choose a value in [-1, 1]"),
        (["--set", "burst_steps=6"], "`task.burst_steps=6` is invalid; choose an integer in [1, 3]"),
        (["--set", "burst_restates=maybe"], "`task.burst_restates='maybe'` is invalid; choose true or false"),
    ]:
        result = runner.invoke(app, ["inspect", "--task", "peekread-routes-c0", "--episodes", "8", *args])
        assert result.exit_code == 2 and needle in result.output and result.output.count("\n") == 1, result.output
    result = runner.invoke(app, ["inspect", "--task", "nope"])
    assert result.exit_code == 2 and "`task='nope'` is invalid; choose one of" in result.output
