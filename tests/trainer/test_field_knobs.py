"""The field questions' knobs (issue 20) in the trainer: the summary mask, the per-segment cost, the
learning-rate schedule's clock, a run with every knob on, and bad input on the command line."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from simlab import names
from simlab.cli import app
from simlab.config import resolve
from simlab.errors import ConfigError
from simlab.harness import Phase
from simlab.policy.model import Policy
from simlab.sinks import JsonlSink, read_metrics
from simlab.train import train
from simlab.train.rl import Trainer
from simlab.train.tokens import TokenBatch
from simlab.update import SGD, Adam
from tests.test_bad_input import _fails_cleanly, run

from .conftest import tiny


def trainer(**train_settings: Any) -> Trainer:
    torch.manual_seed(0)
    cfg = resolve(tiny(train=train_settings, harness={"frac": 0.7}))
    return Trainer(cfg, Policy(cfg.policy))


def credit_of(tr: Trainer) -> tuple[Any, TokenBatch, dict[str, torch.Tensor]]:
    rb, _, _ = tr.rollout(0)
    tb = TokenBatch.from_rollouts(rb, tr.device)
    batch, grids, _ = tr.credit(rb, tb, None)
    return batch, tb, grids


def test_masked_summary_tokens_get_no_weight_and_leave_the_denominator():
    _, tb, grids = credit_of(trainer(summary_loss="mask", overlong_mask=False))
    summary = (tb.phase == int(Phase.SUMMARY)) & tb.optimised
    assert summary.any(), "the tiny task must compact for this test to mean anything"
    w = grids["weights"]
    assert not w[summary].any()
    counted = tb.optimised & ~summary
    assert (w[counted] > 0).all()
    assert float(w.sum()) == pytest.approx(1.0)  # token-mean over the tokens that still count
    _, _, trained = credit_of(trainer(summary_loss="train", overlong_mask=False))
    assert (trained["weights"][summary] > 0).all()


@pytest.mark.parametrize("summary_loss", ["train", "mask"])
def test_masked_answer_tokens_get_no_weight_and_leave_the_denominator(summary_loss: str):
    """``train.answer_loss = "mask"``: the answer tokens weigh 0 and the token mean runs over the rest (with the
    summaries masked too where ``summary_loss`` says so); the trained answer weighs what every token does."""
    _, tb, grids = credit_of(trainer(answer_loss="mask", summary_loss=summary_loss, overlong_mask=False))
    answer = (tb.phase == int(Phase.ANSWER)) & tb.optimised
    summary = (tb.phase == int(Phase.SUMMARY)) & tb.optimised
    assert answer.any() and summary.any(), "the tiny task must answer and compact for this test to mean anything"
    w = grids["weights"]
    off = answer | summary if summary_loss == "mask" else answer
    assert not w[off].any() and (w[tb.optimised & ~off] > 0).all()
    assert float(w.sum()) == pytest.approx(1.0)
    assert float(w[tb.optimised & ~off].min()) == pytest.approx(1 / int((tb.optimised & ~off).sum()))


def test_a_masked_answer_with_a_separate_summary_loss_is_refused():
    with pytest.raises(ConfigError, match=r"`train.answer_loss='mask'` is invalid; summary_loss='separate'"):
        resolve(tiny(train={"answer_loss": "mask", "summary_loss": "separate"}))


def test_a_separate_summary_loss_gives_the_summaries_their_own_weight():
    _, tb, grids = credit_of(trainer(summary_loss="separate", summary_weight=0.5, overlong_mask=False))
    summary = (tb.phase == int(Phase.SUMMARY)) & tb.optimised
    assert summary.any(), "the tiny task must compact for this test to mean anything"
    w = grids["weights"]
    assert float(w[summary].sum()) == pytest.approx(0.5)  # FoldAct: L_act + 0.5 L_sum, each a token mean
    assert float(w[tb.optimised & ~summary].sum()) == pytest.approx(1.0)


def test_a_cost_shapes_the_reward_the_estimator_sees():
    plain, _, _ = credit_of(trainer())
    shaped, tb, _ = credit_of(trainer(cost="segments", cost_coef=0.1))
    np.testing.assert_allclose(shaped.rewards, plain.rewards - 0.1 * plain.segments_per_rollout)
    ctx, _, _ = credit_of(trainer(cost="context", cost_coef=1e-3))
    positions = torch.arange(tb.tokens.shape[1])
    keys = [float((positions * tb.optimised[s]).sum()) for s in range(plain.num_segments)]
    per_rollout = np.bincount(plain.seg_rollout, weights=keys, minlength=plain.num_rollouts)
    np.testing.assert_allclose(ctx.rewards, plain.rewards - 1e-3 * per_rollout)
    won, _, _ = credit_of(trainer(cost="segments", cost_coef=0.1, cost_on="success"))
    charged = np.where(plain.rewards >= 1.0, 0.1 * plain.segments_per_rollout, 0.0)
    assert (plain.rewards >= 1.0).any() and (plain.rewards < 1.0).any(), "the tiny task must both win and lose"
    np.testing.assert_allclose(won.rewards, plain.rewards - charged)


@pytest.mark.parametrize("unit", ["rollouts", "rows"])
def test_the_schedule_clock_counts_rollouts_or_rows(unit: str):
    tr = trainer(lr_schedule="linear", schedule_unit=unit, steps=4)
    t = tr.cfg.train
    first = tr.step(0)
    assert first[names.LOSS_LR] == pytest.approx(t.lr)
    rows = first[names.metric(names.TRAIN, names.SEGMENTS_MEAN)] * t.prompts * t.group_size
    expected = t.prompts * t.group_size if unit == "rollouts" else rows
    assert tr.schedule_used == pytest.approx(expected)
    second = tr.step(1)
    assert second[names.LOSS_LR] == pytest.approx(t.lr * (1 - expected / (4 * t.prompts * t.group_size)))
    assert tr.opt.param_groups[0]["lr"] == pytest.approx(second[names.LOSS_LR])


def test_a_run_with_every_knob_on(tmp_path: Path):
    cfg = resolve(tiny(
        train={"row_weight": "inverse_k", "normaliser": "seq-mean-token-sum", "summary_loss": "mask",
               "baseline": "finished", "cost": "context", "cost_coef": 1e-4, "ratio": "segment",
               "eps_low": 3e-4, "eps_high": 4e-4, "lr_schedule": "cosine", "schedule_unit": "rows",
               "threshold_draw": "group", "frac_spread": 0.1},
        harness={"frac": 0.7},
    ))
    final = train(cfg, JsonlSink(tmp_path / "run"), store=tmp_path)
    assert 0.0 <= final[names.EVAL_COMPACTED_SUCCESS] <= 1.0
    rows = read_metrics(tmp_path / "run")
    logged = {k for row in rows for k in row}
    assert {names.LOSS_LR, names.LOSS_SHAPED_RETURN} <= logged
    assert all(math.isfinite(row[names.LOSS_GRAD_NORM]) for row in rows if names.LOSS_GRAD_NORM in row)


BAD = [
    ("train.row_weight=1/k", "`train.row_weight='1/k'` is invalid; choose one of 'none', 'inverse_k'"),
    ("train.normaliser=seq-mean", "`train.normaliser='seq-mean'` is invalid; choose one of"),
    ("train.baseline=valid", "`train.baseline='valid'` is invalid; choose one of 'all', 'finished'"),
    ("train.summary_loss=drop", "`train.summary_loss='drop'` is invalid; choose one of 'train', 'mask'"),
    ("train.answer_loss=drop", "`train.answer_loss='drop'` is invalid; choose one of 'train', 'mask'"),
    ("train.ratio=sequence", "`train.ratio='sequence'` is invalid; choose one of 'token', 'segment'"),
    ("train.cost=time", "`train.cost='time'` is invalid; choose one of 'none', 'tokens'"),
    ("train.cost_coef=-0.1", "`train.cost_coef=-0.1` is invalid; choose a finite value >= 0"),
    ("train.cost_coef=0.1", "`train.cost_coef=0.1` is invalid; cost='none' has nothing to scale"),
    ("train.cost_on=success", "`train.cost_on='success'` is invalid; no cost is charged"),
    ("train.cost_on=wins", "`train.cost_on='wins'` is invalid; choose one of 'all', 'success'"),
    ("train.lr_schedule=step", "`train.lr_schedule='step'` is invalid; choose one of 'constant', 'linear'"),
    ("train.schedule_unit=segments", "`train.schedule_unit='segments'` is invalid; choose one of 'rollouts'"),
    ("train.threshold_draw=prompt", "`train.threshold_draw='prompt'` is invalid; choose one of 'fixed'"),
    ("train.frac_spread=0.1", "`train.frac_spread=0.1` is invalid; threshold_draw='fixed' draws nothing"),
    ("train.frac_spread=1.5", "`train.frac_spread=1.5` is invalid; choose a value in [0, 1)"),
]


@pytest.mark.parametrize(("setting", "message"), BAD, ids=[s for s, _ in BAD])
def test_bad_knob_on_the_command_line(tmp_path: Path, setting: str, message: str):
    out = CliRunner().invoke(app, ["train", "--set", setting, "--out", str(tmp_path / "run"),
                                   "--store", str(tmp_path / "s")])
    _fails_cleanly(out, message)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (["train.estimator=gae_concat", "train.baseline=finished"],
         "`train.baseline='finished'` is invalid; it applies to group estimators, not 'gae_concat'"),
        (["harness.trigger=budget", "train.threshold_draw=group"],
         "`train.threshold_draw='group'` is invalid; trigger 'budget' does not read harness.frac"),
        (["train.threshold_draw=rollout", "train.frac_spread=0.5"],
         "`train.frac_spread=0.5` is invalid; the draw reaches harness.frac="),
    ],
)
def test_knobs_that_do_not_go_together(tmp_path: Path, settings: list[str], message: str):
    args = [a for s in settings for a in ("--set", s)]
    _fails_cleanly(run("train", *args, "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s")), message)
    assert list(tmp_path.iterdir()) == []


def test_the_optimizer_is_the_policys_and_the_critic_keeps_adam():
    tr = trainer(optimizer="sgd", lr=0.3, critic_lr_scale=0.003, estimator="gae_compaction", critic="separate")
    assert isinstance(tr.opt, SGD) and isinstance(tr.critic_opt, Adam)
    assert tr.opt.param_groups[0]["lr"] == 0.3 and tr.critic_opt.param_groups[0]["lr"] == pytest.approx(9e-4)
    assert isinstance(trainer().opt, Adam)


def test_a_misspelt_optimizer_is_refused_before_the_store(tmp_path: Path) -> None:
    out = run("train", "--set", "train.optimizer=adamw", "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    _fails_cleanly(out, "`train.optimizer='adamw'` is invalid; choose one of 'adam', 'sgd'")
    assert list(tmp_path.iterdir()) == []


def test_a_summariser_loss_without_a_separate_summariser_is_refused_before_the_store(tmp_path: Path) -> None:
    out = run("train", "--set", "task.preset=peekread-lossy", "--set", "train.recipe=supo", "--set",
              "harness.summariser_loss=0.5", "--out", str(tmp_path / "run"), "--store", str(tmp_path / "s"))
    _fails_cleanly(out, "`harness.summariser_loss=0.5` is invalid; choose 0 unless harness.summariser is a separate "
                   "summariser (a reference agent or 'frozen'; it is 'self')")
    assert list(tmp_path.iterdir()) == []
