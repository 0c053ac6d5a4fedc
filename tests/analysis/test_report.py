"""``simlab report`` on a real MLflow sqlite store written through :mod:`simlab.tracking`.

The store holds what the sweep runner writes: a parent run, and per trial a child run with the runner's
tags (cell, variant, seed, trial number), the flattened config as params, and per-step metrics (both
evaluations, compaction health, segment-count buckets), finished with the runner's ``final/`` copy.
Four variants x three seeds on 50 evaluation episodes, each seed its own held-out set (``eval.seed =
"run"``) but no per-episode outcomes kept (runs logged before they were); one run never logged its
compacted success and one run FAILED. Expected numbers are worked by hand in the comments (points; SE =
sqrt(max(V_bin, V_seed)), V_bin = (1/k^2) sum 1e4 p(1-p)/n, V_seed = s^2/k). A second experiment keeps
per-episode outcomes, on one shared held-out set and on one per seed.
"""

from __future__ import annotations

import math
import shutil
import warnings
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from scipy import stats as sps

from simlab import names, tracking
from simlab.analysis.report import build as rp
from simlab.analysis.report import figures
from simlab.analysis.report import health as rh
from simlab.analysis.report import published as rpub
from simlab.analysis.report.runs import GROUP_HEALTH, INDEX_HEALTH
from simlab.analysis.statistics import levels
from simlab.sweep import labels
from tests.stores import run_cli

N = 50
A = "harness.max_compactions=4,train.estimator=rollout_group,train.normaliser=token"  # baseline: first in grid order
B = "harness.max_compactions=4,train.estimator=trajectory_group,train.normaliser=token"
C = "harness.max_compactions=4,train.estimator=rollout_group,train.normaliser=segment"
D = "harness.max_compactions=8,train.estimator=rollout_group,train.normaliser=token"  # 1.8x the effective horizon


def leaf_label(variant: str) -> str:
    """How the label was spelt before labels used key paths."""
    return ",".join(f"{labels.leaf(k)}={v}" for k, v in labels.parse_label(variant).items())
# final compacted success per seed; None: the run never logged it
COMPACTED = {A: [0.50, 0.60, 0.70], B: [0.80, 0.84, None], C: [0.40, 0.44, 0.48], D: [0.70, 0.74, 0.30]}
SINGLE = {A: [0.40, 0.40, 0.40], B: [0.50, 0.50, 0.50], C: [0.30, 0.30, 0.30], D: [0.45, 0.45, 0.45]}
FAILED = (D, 2)


@dataclass(frozen=True)
class Built:
    uri: str
    parent: str
    folder: Path


def _log_trial(client, eid: str, parent: str, trial: int, variant: str, seed: int) -> None:
    # C's runs predate the variant tag and key-path labels: the report strips the seed off the cell and
    # reads its leaf keys against the run's logged config; D's first seed was logged with a leaf label
    old = variant == C or (variant, seed) == (D, 0)
    cell = f"{leaf_label(variant) if old else variant},seed={seed}"
    tags = {
        tracking.SWEEP_TAG: "toy",
        tracking.TRIAL_TAG: str(trial),
        tracking.CELL_TAG: cell,
        tracking.SEED_TAG: str(seed),
    }
    if variant != C:
        tags[tracking.VARIANT_TAG] = cell.removesuffix(f",seed={seed}")
    run_id = tracking.child_run(client, eid, parent, f"{trial}:{cell}", tags)
    sink = tracking.MlflowSink(client, run_id, figures=False)
    settings = labels.parse_label(variant)
    sink.log_params(
        {
            "eval": {"episodes": N},
            "harness": {
                "window": 128,
                "frac": 0.8,
                "max_compactions": int(settings["harness.max_compactions"]),
                "trigger": "threshold",
                "t_comp": 24,
            },
            "sweep.cell": cell,
            "base": {"seed": "run"},
            "train": {"estimator": settings["train.estimator"], "normaliser": settings["train.normaliser"]},
        }
    )
    sink.log_params({"eval": {"seed": "run"}})
    final_c, final_s = COMPACTED[variant][seed], SINGLE[variant][seed]
    for step in (0, 4, 8):
        last = step == 8
        metrics = {
            "eval/single_window/success": final_s if last else 0.1,
            "train/compaction_rate": 0.2 + 0.05 * step,
            "train/summarised_success": 0.3 + 0.04 * step,
            "health/segments/count_1": 8.0 - step // 2,
            "health/segments/count_2": 4.0 + step // 2,
            "health/segments/count_3": float(step // 4),
            # credit health: the segment normaliser over-weights compacting rollouts; B's baseline shifts
            "health/longer/loss_share": 0.8 if variant == C else 0.6,
            "health/longer/token_share": 0.6,
            "health/baseline_shift/mean": 0.1 * seed if variant == B else 0.0,
            **_rollout_health(variant, seed, step),
        }
        if final_c is not None:
            metrics["eval/compacted/success"] = final_c if last else 0.25
        sink.log_metrics(metrics, step)
    if (variant, seed) == FAILED:
        sink.close("FAILED", "RuntimeError: diverged")
        return
    finals = {"final/eval/single_window/success": final_s}
    if final_c is not None:
        finals["final/eval/compacted/success"] = final_c
    sink.log_metrics(finals, 8)
    sink.close("FINISHED")


def _rollout_health(variant: str, seed: int, step: int) -> dict[str, float]:
    """What the evaluations saw; tied groups in training only; the reward per row above per rollout in B; index
    and context buckets."""
    last = step == 8
    return {
        "eval/single_window/overlong_rate": 0.1 * seed if last else 0.5,
        "eval/compacted/tokens_per_episode": 40.0 + step * (seed + 1),  # the last: 48, 56, 64
        "train/group_all_fail_rate": 0.05 * step / 4,  # 0, 0.05, 0.1 -> mean over steps 0.05
        "train/group_no_gradient_rate": 0.3,
        "train/return": 0.4,
        "train/return_per_row": 0.4 + (0.1 * seed if variant == B else 0.0),
        "eval/compacted/return_per_row": 0.7 if last else 0.2,
        "eval/compacted/summary_length_at1": 4.0 + seed if last else 9.0,
        "train/context_before_compaction": 30.0 + step,  # 30, 34, 38 -> 34
        **(_base_quality(seed) if step == 0 else {}),
    }


def _base_quality(seed: int) -> dict[str, float]:
    """A seed's base before RL, the same in every variant: base 30 / 40 / 50, floor 20, teacher 50."""
    base, floor, teacher, se = 0.3 + 0.1 * seed, 0.2, 0.5, 0.02
    return {"base/heldout/success": base, "base/heldout_floor/success": floor, "base/heldout_teacher/success": teacher,
            "base/heldout_gain": base - floor, "base/heldout_gain_se": se, "base/heldout_above_floor": 1.0,
            "base/heldout_teacher_lead": teacher - base}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, empty_mlflow_db: Path) -> Built:
    folder = tmp_path_factory.mktemp("report-store")
    shutil.copy(empty_mlflow_db, folder / "mlflow.db")
    store = tracking.resolve_store(f"sqlite:///{folder / 'mlflow.db'}")
    client = tracking.prepare(store)
    eid = tracking.ensure_experiment(client, "toy", store)
    parent = tracking.parent_run(client, eid, "toy", {"simlab.objective": "eval/compacted/success"})
    trial = 0
    for variant in (A, B, C, D):
        for seed in range(3):
            _log_trial(client, eid, parent, trial, variant, seed)
            trial += 1
    tracking.finish_run(client, parent)
    # an experiment whose only run failed: nothing to report
    bad = tracking.ensure_experiment(client, "all-failed", store)
    bad_parent = tracking.parent_run(client, bad, "all-failed", {})
    tracking.finish_run(client, tracking.child_run(client, bad, bad_parent, "0:seed=0", {}), "FAILED")
    return Built(store.tracking_uri, parent, folder)


@pytest.fixture(scope="module")
def made(built: Built, tmp_path_factory: pytest.TempPathFactory) -> rp.Report:
    out = tmp_path_factory.mktemp("report-out")
    return rp.build_report("toy", out=out, against=True, tracking_uri=built.uri)


def _row(table: pl.DataFrame, variant: str, evaluation: str = "compacted") -> dict:
    return table.filter((pl.col("variant") == variant) & (pl.col("evaluation") == evaluation)).row(0, named=True)


def test_means_ses_and_differences_match_hand_computation(made: rp.Report) -> None:
    t = made.table
    a, b, c, d = (_row(t, v) for v in (A, B, C, D))
    # A: 50, 60, 70 -> mean 60; s^2 = 100, V_seed = 33.33 > V_bin = (50 + 48 + 42) / 9 = 15.56
    assert a["mean"] == pytest.approx(60.0)
    assert a["se"] == pytest.approx(math.sqrt(100 / 3))
    assert (a["design"], a["df"]) == ("rates", 2)
    # B: 80, 84 (the third seed missing) -> mean 82; V_seed = 8 / 2 = 4 < V_bin = (32 + 26.88) / 4 = 14.72
    assert (b["mean"], b["seeds"], b["missing"], b["unfinished"]) == (pytest.approx(82.0), 2, 1, 0)
    assert b["se"] == pytest.approx(math.sqrt(14.72))
    assert b["difference"] == pytest.approx(22.0)
    assert b["se_difference"] == pytest.approx(math.sqrt(100 / 3 + 14.72))
    assert b["sigma"] == pytest.approx(22.0 / math.sqrt(100 / 3 + 14.72))  # 3.17
    # B and D share only two seeds with A, too few to pair: two independent means, Welch's df
    welch = (100 / 3 + 14.72) ** 2 / ((100 / 3) ** 2 / 2 + 14.72**2 / 1)
    assert (b["diff_design"], b["diff_df"]) == ("seeds", pytest.approx(welch))
    # 3.17 SE at df 2.99 is p = 0.051: not significant at 0.05 (a flat 2 SE would have called it "differs"),
    # and its interval is far wider than the tie margin
    assert 2 * sps.t.sf(22.0 / math.sqrt(100 / 3 + 14.72), welch) == pytest.approx(0.0507, abs=1e-3)
    assert b["verdict"] == "undecided"
    # C: 40, 44, 48 -> mean 44; V_bin = (48 + 49.28 + 49.92) / 9 = 16.36 > V_seed = 16 / 3
    assert c["se"] == pytest.approx(math.sqrt(147.2 / 9))
    # C shares all three seeds with A: paired differences -10, -16, -22 -> mean -16, s_d = 6, se = 6 / sqrt(3)
    # (unpaired it would be sqrt(100 / 3 + 147.2 / 9) = 7.05, sigma -2.27)
    assert (c["diff_design"], c["diff_df"]) == ("rates", 2)
    assert c["difference"] == pytest.approx(-16.0)
    assert c["se_difference"] == pytest.approx(6 / math.sqrt(3))
    assert c["sigma"] == pytest.approx(-16.0 / (6 / math.sqrt(3)))  # -4.62
    half = sps.t.ppf(0.975, 2) * 6 / math.sqrt(3)  # the t interval of the same estimate
    assert (c["diff_ci_low"], c["diff_ci_high"]) == (pytest.approx(-16 - half), pytest.approx(-16 + half))
    # the interval of a mean is the t interval of the mean and its SE, never a contradiction of it
    assert a["ci_low"] == pytest.approx(60 - sps.t.ppf(0.975, 2) * math.sqrt(100 / 3))
    assert a["iqm"] == pytest.approx(60.0)
    # D: 70, 74 finished, the third FAILED -> counted as unfinished, not as a seed nor as missing
    assert (d["mean"], d["seeds"], d["missing"], d["unfinished"]) == (pytest.approx(72.0), 2, 0, 1)
    assert d["se"] == pytest.approx(math.sqrt((42 + 38.48) / 4))
    se_d = math.sqrt(100 / 3 + 20.12)
    assert d["sigma"] == pytest.approx(12.0 / se_d)  # 1.64: not significant, and far from a tie within 5
    df_d = (100 / 3 + 20.12) ** 2 / ((100 / 3) ** 2 / 2 + 20.12**2 / 1)
    assert d["mde"] == pytest.approx((sps.t.ppf(0.975, df_d) + sps.t.ppf(0.8, df_d)) * se_d)
    assert d["verdict"] == "undecided" and d["seeds_to_decide"] > 10
    # single-window: A's three seeds agree, so the binomial floor is the whole SE: sqrt(3 * 48 / 9) = 4
    sw = _row(t, A, "single_window")
    assert (sw["mean"], sw["se"]) == (pytest.approx(40.0), pytest.approx(4.0))


def test_like_for_like_and_ties(made: rp.Report) -> None:
    t = made.table
    # H = floor(0.8 * 128) x (S + 1) = 102 x 5 = 510 for S = 4, 102 x 9 = 918 for S = 8
    assert _row(t, A)["horizon"] == 510 and _row(t, D)["horizon"] == 918
    assert _row(t, D)["like_for_like"] is False and _row(t, D)["horizon_ratio"] == pytest.approx(1.8)
    assert _row(t, B)["like_for_like"] is True
    # single-window evaluation disables compaction: every variant runs at H = W, so like-for-like
    assert _row(t, D, "single_window")["like_for_like"] is True
    # ranks by the findings' rule: t tests over the 6 pairs, Holm-adjusted together. With 2-3 seeds an arm
    # (df 1-2), B's lead over C (38 points) is the largest, yet no pair survives the adjustment: all tie
    ranks = {v: _row(t, v)["rank"] for v in (A, B, C, D)}
    assert ranks == {B: 1, D: 1, A: 1, C: 1}


def test_markdown_figures_and_parent_artifacts(made: rp.Report, built: Built) -> None:
    md = made.markdown
    assert f"{A} (baseline)" in md and "no (1.8x)" in md
    assert "11 of 12 trial runs finished" in md
    assert "seeds vary: base model, held-out set, RL sampling" in md
    assert "α = 0.05 (two-sided), power 80%, equivalence margin ±5 points" in md
    names = {p.name for p in made.files}
    figures = {*rp.FIGURES, "differences.png"}
    assert {"report.md", "report.csv", "report.parquet", *figures} <= names
    for fig in figures:
        path = next(p for p in made.files if p.name == fig)
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    assert made.skipped == []
    written = pl.read_parquet(next(p for p in made.files if p.name == "report.parquet"))
    assert made.speed is not None and written.equals(pl.concat([made.table, made.speed]))
    assert made.logged_to == built.parent
    logged = {Path(p).name for p in tracking.list_artifacts(tracking.resolve_store(built.uri), built.parent, "report")}
    assert names <= logged


def test_the_report_draws_without_a_warning(built: Built, tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an empty legend, a bad limit: any warning fails the report
        rp.build_report("toy", out=tmp_path, tracking_uri=built.uri, log=False)


def test_speed_table_reads_the_evaluation_curves(made: rp.Report) -> None:
    assert made.speed is not None
    a = made.speed.filter((pl.col("variant") == A) & (pl.col("statistic") == "auc")).row(0, named=True)
    # A seed 0: compacted success 0.25, 0.25, 0.5 at steps 0, 4, 8 -> (25 * 4 + 37.5 * 4) / 8 = 31.25
    # seeds 1, 2: ... 0.6, 0.7 -> 33.75, 36.25; mean 33.75
    assert a["mean"] == pytest.approx(33.75)
    assert "learning speed: area under the compacted evaluation curve" in made.markdown


def test_the_ranking_is_by_paired_gain_beside_final_success_and_context(made: rp.Report) -> None:
    assert made.ranking is not None and made.speed is not None
    gains = made.speed.filter(pl.col("statistic") == "gain")
    assert sorted(made.ranking["variant"].to_list()) == sorted(gains["variant"].to_list())
    ranks = made.ranking["gain_rank"].to_list()
    assert ranks == sorted(ranks)  # listed in the order of the gain ranking
    for r in made.ranking.iter_rows(named=True):
        g = gains.filter(pl.col("variant") == r["variant"]).row(0, named=True)
        f = _row(made.table, r["variant"])
        assert (r["gain"], r["gain_se"], r["gain_rank"]) == (g["mean"], g["se"], g["rank"])
        assert (r["final"], r["final_rank"], r["horizon"]) == (f["mean"], f["rank"], f["horizon"])
    a = made.ranking.filter(pl.col("variant") == A).row(0, named=True)
    assert a["gain"] == pytest.approx(100 * (sum(COMPACTED[A]) / 3 - 0.25))  # every run starts at 0.25
    # seeds 0, 1, 2 end at 48, 56, 64 tokens per episode; seed 2 of D failed, so D's mean is over 48 and 56
    assert a["tokens"] == pytest.approx(56.0)
    md = made.markdown
    assert md.index("### Ranking: paired learning gain") < md.index("### compacted success")


def test_evaluation_table_takes_each_runs_final_evaluation(made: rp.Report) -> None:
    table = rh.evaluation_table(made.sweep)
    assert table is not None
    row = table.filter((pl.col("variant") == A) & (pl.col("evaluation") == "single_window")).row(0, named=True)
    # final single-window overlong rate 0.0, 0.1, 0.2 over seeds 0-2 (not the 0.5 of earlier steps)
    assert row["overlong"] == pytest.approx(0.1) and row["overlong_se"] == pytest.approx(0.1 / math.sqrt(3))
    assert row["segments"] is None  # never logged: n/a, not 0
    assert "What the evaluations saw" in made.markdown and "| 10.0 ± 5.8" in made.markdown


def test_segment_shares_pool_seeds(made: rp.Report) -> None:
    assert made.sweep.history is not None
    seg = figures.segment_table(made.sweep.history).filter((pl.col("variant") == A) & (pl.col("step") == 8))
    # per seed at step 8: 4, 8, 2 rollouts with 1, 2, 3 segments -> shares 4/14, 8/14, 2/14
    assert seg.get_column("rollouts").to_list() == [12.0, 24.0, 6.0]
    assert seg.get_column("share").to_list() == pytest.approx([4 / 14, 8 / 14, 2 / 14])


def test_against_published(made: rp.Report) -> None:
    assert made.published is not None
    rows = {r["ablation"]: r for r in made.published.iter_rows(named=True)}
    traj = rows["supo.ablation.trajectory_group.bcp"]  # rollout_group -> trajectory_group: A -> B
    assert (traj["full_variant"], traj["ablated_variant"]) == (A, B)
    assert traj["published_difference"] == pytest.approx(-4.0)
    assert traj["difference"] == pytest.approx(22.0) and traj["same_direction"] is False
    # two independent means, t at Welch's df 2.99: p 0.051, so not significant (a flat 2 SE said it was)
    assert traj["df"] == pytest.approx((100 / 3 + 14.72) ** 2 / ((100 / 3) ** 2 / 2 + 14.72**2 / 1))
    assert traj["verdict"] == "opposite direction, not significant (3.17 sigma, p 0.051)"
    token = rows["compactionrl.ablation.token_level_loss"]  # token -> segment: A -> C
    assert token["published_difference"] == pytest.approx(-6.8)
    # independent means (the pairing of C with A is not used here): Welch df (33.3 + 16.4)^2 /
    # (33.3^2 / 2 + 16.4^2 / 2) = 3.58, and 2.27 SE there is p 0.094: the direction, not yet significant
    assert token["df"] == pytest.approx(3.582, abs=1e-3)
    assert token["reproduces_direction"] is False
    assert token["verdict"] == "same direction, not significant (2.27 sigma, p 0.094)"
    for rid in (
        "supo.ablation.overlong_mask.bcp",
        "compactionrl.ablation.gae_correction",
        "supo.ablation.trajectory_group.codegym",
    ):
        assert rows[rid]["difference"] is None and rows[rid]["verdict"].startswith("not tested")
    assert "not tested: this sweep's `train.overlong_mask` is not varied" in made.markdown


def test_default_baseline_is_the_sweeps_named_one_else_the_first_cell(made: rp.Report) -> None:
    # the runner tags the parent run with the spec's `baseline`; a stale name falls back to grid order
    assert rp.default_baseline(replace(made.sweep, baseline_hint=C)) == C
    assert rp.default_baseline(replace(made.sweep, baseline_hint=leaf_label(C))) == C  # logged before key paths
    assert rp.default_baseline(replace(made.sweep, baseline_hint="estimator=grpo")) == A
    assert made.sweep.variants == [A, B, C, D]


def test_history_export_and_per_key_reading_agree(built: Built, tmp_path: Path) -> None:
    # runs logged before the metrics export existed are read one key at a time: same histories
    shutil.copy(built.folder / "mlflow.db", tmp_path / "mlflow.db")
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = tracking.resolve_store(uri).client()
    for run in client.search_runs([rp.load_runs("toy", uri).experiment_id]):
        if names.METRICS_TABLE_TAG in run.data.tags:
            client.delete_tag(run.info.run_id, names.METRICS_TABLE_TAG)
    exported, per_key = rp.load_runs("toy", built.uri), rp.load_runs("toy", uri)
    assert exported.history is not None and per_key.history is not None
    order = ["run_id", "key", "step"]
    assert per_key.history.sort(order).equals(exported.history.sort(order))
    assert per_key.runs.equals(exported.runs)
    assert rp.variant_table(per_key).equals(rp.variant_table(exported))


def test_cli_report_and_baseline(built: Built, tmp_path: Path) -> None:
    res = run_cli(["report", "toy", "--tracking-uri", built.uri, "--out", str(tmp_path), "--baseline", B])
    assert res.exit_code == 0, res.output
    assert f"{B} (baseline)" in res.output
    assert (tmp_path / "report.md").read_text().startswith("## simlab report: toy")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "experiment 'nope' does not exist"),
        (["all-failed"], "has no finished runs (1 FAILED)"),
        (["toy", "--baseline", "estimator=grpo"], f"choose one of the variants: {A}, {B}, {C}, {D}"),
        (["toy", "--baseline", leaf_label(B)], f"`--baseline={leaf_label(B)!r}` is invalid; write {B!r} (a label "
         "spells each setting by its key path, as --set does)"),
        (["toy", "--effect", "0"], "`--effect=0.0` is invalid; choose an effect size > 0 points"),
        (["toy", "--effect", "nan"], "`--effect=nan` is invalid"),
        (["toy", "--alpha", "0"], "`--alpha=0.0` is invalid; choose a significance level in (0, 0.5]"),
        (["toy", "--power", "1.5"], "`--power=1.5` is invalid; choose a power in [0.5, 1)"),
        (["toy", "--threshold", "150"], "`--threshold=150.0` is invalid; choose a success level in [0, 100]"),
    ],
)
def test_cli_bad_input_exits_2(built: Built, tmp_path: Path, args: list[str], message: str) -> None:
    res = run_cli(["report", *args, "--tracking-uri", built.uri, "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert message in res.output
    assert list(tmp_path.iterdir()) == []  # nothing written on bad input


def test_cli_bad_out_and_uri_exit_2(built: Built, tmp_path: Path) -> None:
    res = run_cli(["report", "toy", "--tracking-uri", built.uri, "--out", str(tmp_path / "absent")])
    assert res.exit_code == 2 and "choose an existing folder" in res.output
    res = run_cli(["report", "toy", "--tracking-uri", str(built.folder / "mlflow.db")])
    assert res.exit_code == 2 and "plain file store" in res.output


def test_experiment_by_id(built: Built) -> None:
    by_name = rp.load_runs("toy", built.uri)
    assert rp.load_runs(by_name.experiment_id, built.uri).runs.equals(by_name.runs)


@pytest.mark.parametrize(
    ("diff", "sigma", "p", "verdict", "reproduces"),
    [
        (-5.0, -2.5, 0.03, "reproduces the direction at 2.50 sigma, p 0.03", True),
        (-5.0, -2.5, 0.07, "same direction, not significant (2.50 sigma, p 0.07)", False),
        (-1.0, -0.4, 0.7, "same direction, within noise (0.40 sigma, p 0.7)", False),
        (-3.0, -1.5, 0.2, "same direction, not significant (1.50 sigma, p 0.2)", False),
        (4.0, 2.0, 0.049, "opposite direction at 2.00 sigma, p 0.049", False),
        (-3.0, -1.5, math.nan, "same direction, no SE (1.50 sigma)", False),
        (0.0, 0.0, 1.0, "no difference (0.00 sigma, p 1)", False),
    ],
)
def test_direction_against_a_negative_published_delta(
    diff: float, sigma: float, p: float, verdict: str, reproduces: bool
) -> None:
    got = rpub._direction(diff, sigma, p, -4.0)
    assert (got["verdict"], got["reproduces_direction"]) == (verdict, reproduces)


def test_rollout_health_tables_average_training_steps_and_take_each_final_evaluation(made: rp.Report) -> None:
    groups = rh.stage_table(made.sweep, GROUP_HEALTH)
    assert groups is not None
    train_b = _row(groups.rename({"stage": "evaluation"}), B, "training")
    assert train_b["all_fail"] == pytest.approx(0.05) and train_b["no_gradient"] == pytest.approx(0.3)
    assert train_b["all_success"] is None  # never logged: n/a, not 0
    # per row 0.4, 0.5, 0.6 over seeds 0-2 beside 0.4 per rollout
    assert train_b["reward_row"] == pytest.approx(0.5) and train_b["reward_row_se"] == pytest.approx(0.1 / 3**0.5)
    assert train_b["reward_rollout"] == pytest.approx(0.4) and train_b["reward_rollout_se"] == pytest.approx(0.0)
    compacted = _row(groups.rename({"stage": "evaluation"}), A)
    assert compacted["reward_row"] == pytest.approx(0.7) and compacted["no_gradient"] is None  # its final value
    assert set(groups["stage"]) == {"training", "compacted"}  # the single window logged none of them
    index = rh.stage_table(made.sweep, INDEX_HEALTH)
    assert index is not None
    # final first-summary lengths 4, 5, 6 over seeds; D's third seed FAILED: 4, 5
    assert _row(index.rename({"stage": "evaluation"}), A)["summary_1"] == pytest.approx(5.0)
    assert _row(index.rename({"stage": "evaluation"}), D)["summary_1"] == pytest.approx(4.5)
    assert _row(index.rename({"stage": "evaluation"}), A, "training")["context_before"] == pytest.approx(34.0)
    md = made.markdown
    assert "### Prompt groups and rewards" in md and "### Compaction by index, in tokens" in md
    assert md.index("### What the evaluations saw") < md.index("### Prompt groups") < md.index("### Credit health")
    cells = [[c.strip() for c in line.split("|")[1:-1]] for line in md.splitlines() if line.startswith(f"| {B} ")]
    assert ["training", "5.0 ± 0.0", "n/a", "30.0 ± 0.0", "0.40 ± 0.00", "0.50 ± 0.06"] in [c[1:] for c in cells]
    assert "summary 5+" in md and "4.50 ± 0.50" in md  # D's first summaries, final compacted evaluation


def test_credit_health_table(made: rp.Report) -> None:
    credit = rh.credit_table(made.sweep)
    assert credit is not None
    rows = {r["variant"]: r for r in credit.iter_rows(named=True)}
    assert rows[C]["excess"] == pytest.approx(0.2) and rows[C]["excess_se"] == pytest.approx(0.0)
    assert rows[A]["excess"] == pytest.approx(0.0)
    assert rows[B]["baseline_shift"] == pytest.approx(0.1)  # seeds 0, 1, 2 -> 0.0, 0.1, 0.2
    assert rows[B]["baseline_shift_se"] == pytest.approx(0.1 / 3**0.5)
    assert rows[D]["seeds"] == 2  # the FAILED run is not in the histories
    assert rows[A]["adv_error"] is None  # group estimators log no error against the GAE reference
    assert "### Credit health over training" in made.markdown
    assert "+20.0 ± 0.0" in made.markdown


# ------------------------------------------------------------------- runs that kept their episodes
M = 40


def _episodes_store(folder: Path, empty: Path, shared: bool) -> str:
    """Two variants x four seeds whose runs kept per-episode outcomes (steps 0 and 4, compacted), on one
    held-out set every seed shares or on one per seed; treatment P wins 6 more instances than Q."""
    from simlab.train import log_episodes

    shutil.copy(empty, folder / "mlflow.db")
    store = tracking.resolve_store(f"sqlite:///{folder / 'mlflow.db'}")
    client = tracking.prepare(store)
    eid = tracking.ensure_experiment(client, "eps", store)
    parent = tracking.parent_run(client, eid, "eps", {})
    rng = np.random.default_rng(7)
    for trial, (variant, seed) in enumerate((v, s) for v in ("arm=q", "arm=p") for s in range(4)):
        run_id = tracking.child_run(client, eid, parent, f"{trial}", {tracking.VARIANT_TAG: variant,
                                                                        tracking.SEED_TAG: str(seed)})
        sink = tracking.MlflowSink(client, run_id, figures=False)
        sink.log_params({"eval": {"episodes": M, "seed": 1_000_000 if shared else "run"}, "base": {"seed": "run"}})
        first = 1_000_000 if shared else 1_100_000 + 100_000 * seed
        rows = []
        for step in (0, 4):
            y = (rng.random(M) < 0.4 + (0.15 if variant == "arm=p" and step == 4 else 0.0)).astype(np.int8)
            rows.append(pl.DataFrame({"step": np.full(M, step, np.int32), "evaluation": ["compacted"] * M,
                                      "instance": np.arange(first, first + M), "success": y,
                                      "reward": y.astype(np.float32), "segments": np.ones(M, np.int16),
                                      "tokens": np.full(M, 50, np.int32), "overlong": np.zeros(M, bool)}))
            sink.log_metrics({"eval/compacted/success": float(y.mean()), "eval/compacted/episodes": float(M)}, step)
        log_episodes(sink, pl.concat(rows))
        sink.close("FINISHED")
    tracking.finish_run(client, parent)
    return store.tracking_uri


@pytest.mark.parametrize("shared", [True, False], ids=["one-shared-set", "own-sets"])
def test_the_report_uses_per_episode_outcomes(tmp_path: Path, empty_mlflow_db: Path, shared: bool) -> None:
    uri = _episodes_store(tmp_path, empty_mlflow_db, shared)
    sweep = rp.load_runs("eps", uri)
    assert sweep.episodes is not None and sweep.episodes.height == 8 * 2 * M
    table = rp.variant_table(sweep, "arm=q")
    p = _row(table, "arm=p")
    arms = rp.arms(sweep, "compacted")
    direct = levels.from_episodes(arms["arm=p"].episodes)
    assert (p["design"], p["mean"], p["se"]) == (direct.design, pytest.approx(direct.mean), pytest.approx(direct.se))
    assert p["design"] == ("crossed" if shared else "nested")
    paired = levels.from_episodes(levels.paired_episodes(arms["arm=p"].episodes, arms["arm=q"].episodes))
    assert (p["difference"], p["se_difference"]) == (pytest.approx(paired.mean), pytest.approx(paired.se))
    if shared:  # the shared set's instance term joins the seeds' spread: never below the spread alone
        per_seed = np.array(list(arms["arm=p"].seeds.values()))
        assert p["se"] >= per_seed.std(ddof=1) / 2 - 1e-9 and direct.fixed_var >= 0
    seeds = "held fixed: held-out set (eval.seed = 1000000)" if shared else "seeds vary: base model, held-out set"
    assert seeds in sweep.seeds_vary()


def test_an_evaluation_no_run_played_is_left_out(tmp_path: Path, empty_mlflow_db: Path) -> None:
    """A sweep with eval.single_window = false: no single-window table of n/a rows, and the report builds."""
    uri = _episodes_store(tmp_path, empty_mlflow_db, False)
    table = rp.variant_table(rp.load_runs("eps", uri), "arm=q")
    assert set(table["evaluation"]) == {"compacted"}
    made = rp.build_report("eps", baseline="arm=q", tracking_uri=uri)
    assert "### compacted success" in made.markdown and "single-window success" not in made.markdown


def test_dose_response_interval_keeps_a_bound_of_zero() -> None:
    """A 95% interval bound of exactly 0 is a bound: before, the control's `or` read it as missing and drew
    no bar on that side. A missing bound (None) still draws none."""
    rows = [{"control_difference": 0.5, "control_ci_low": 0.0, "control_ci_high": None}]
    d, low, high = figures.interval(rows, "control_")
    assert (d.tolist(), low.tolist(), high.tolist()) == ([0.5], [0.0], [0.5])
    d, low, high = figures.interval([{"difference": -1.0, "ci_low": -2.0, "ci_high": 0.0}])
    assert (d.tolist(), low.tolist(), high.tolist()) == ([-1.0], [-2.0], [0.0])


def test_the_report_shows_each_seeds_base_before_rl(made: rp.Report) -> None:
    section = made.markdown.split("### Base models before RL", 1)[1].split("###", 1)[0]
    assert "Every variant of a seed starts from the same base." in section
    rows = [line for line in section.splitlines() if line.startswith("| ") and line[2].isdigit()]
    assert [r.split("|")[1].strip() for r in rows] == ["0", "1", "2"]
    cells = [c.strip() for c in rows[0].split("|")[1:-1]]
    assert cells[2:6] == ["30.0", "50.0", "20.0", "10.0 ± 2.0"] and cells[-1] == "far from teacher"
    assert rows[2].rstrip(" |").endswith("ok")  # 50 against a teacher at 50
    assert "3 of 3 bases clearly above their floor; 2 of 3 within 10 points of their teacher." in section
