"""``simlab findings``: verdict rules on hand-made runs, slopes, exports, and bad rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest
from scipy import stats as sps

from simlab.analysis.replication import arms as fa
from simlab.analysis.replication import data as fdd
from simlab.analysis.replication import spec as fs
from simlab.analysis.replication import table as fd
from simlab.analysis.replication import text as findings_text
from simlab.analysis.replication import verdicts as vd
from simlab.analysis.replication.data import SpecData
from simlab.analysis.statistics import compare, power
from simlab.analysis.statistics.compare import Judgement
from simlab.analysis.statistics.levels import Estimate
from simlab.errors import FindingsError
from tests.stores import run_cli

METRIC = "eval/compacted/success"
ROW = """
name = "toy-finding"
seeds = [0]
[[findings]]
id = "9"
finding = "a toy"
published = -4.0
metric = "eval/compacted/success"
treatment = { task.preset = "neg", train.estimator = "tg" }
baseline = { task.preset = "neg", train.estimator = "rg" }
control_treatment = { task.preset = "zero", train.estimator = "tg" }
control_baseline = { task.preset = "zero", train.estimator = "rg" }
mechanism = [{ metric = "health/baseline_shift/mean", reduce = "mean", label = "shift" }]
"""


def row(tmp_path: Path, text: str = ROW) -> fs.FindingRow:
    path = tmp_path / "toy.toml"
    path.write_text(text, encoding="utf-8")
    return fs.parse_rows(path)[0]


def frame(arms: dict[str, list[float]], shift: float = 0.1):
    """Runs of four arms; ``arms`` maps a variant label to the final success of seeds 0, 1, 2, ..."""
    runs, hist = [], {}
    for variant, finals in arms.items():
        for seed, final in enumerate(finals):
            run_id = f"{variant}/{seed}"
            runs.append({"run_id": run_id, "status": "FINISHED", "variant": variant, "seed": seed})
            hist[run_id] = {METRIC: [0.25, final], "health/baseline_shift/mean": [shift, 3 * shift]}
    runs.append({"run_id": "x", "status": "FAILED", "variant": "task.preset=neg,train.estimator=tg", "seed": 9})
    return SpecData(fdd.runs_from_histories(runs, hist, {METRIC, "health/baseline_shift/mean"}))


TG, RG = "task.preset=neg,train.estimator=tg", "task.preset=neg,train.estimator=rg"
CTG, CRG = "task.preset=zero,train.estimator=tg", "task.preset=zero,train.estimator=rg"


def test_reproduced_when_the_sign_matches_at_two_sigma_and_the_control_is_a_decided_tie(tmp_path):
    # paired differences -5, -7, -6, -6 points: mean -6, s_d = sqrt(2/3), se = s_d / 2 -> about -14.7 sigma
    f = frame({TG: [0.50, 0.48, 0.49, 0.50], RG: [0.55, 0.55, 0.55, 0.56],
               CTG: [0.600, 0.605, 0.590, 0.600], CRG: [0.600, 0.600, 0.595, 0.600]})
    got = fd.evaluate_row(row(tmp_path), f, "store")
    assert got["difference"] == pytest.approx(-6.0)
    assert got["se"] == pytest.approx(math.sqrt(2 / 3) / 2)
    assert got["se_from"] == "seeds" and got["seeds"] == 4 and got["df"] == 3
    # control: 0, +0.5, -0.5, 0 -> mean 0, se 0.204; the 90% interval +-2.35 x 0.204 lies inside +-2 (half of 4)
    assert got["control_decided"] and got["control_tost_p"] < 0.05
    # t = 14.7 at df 3: p = 2 P(T_3 > 14.7) = 0.0007, printed to one figure
    assert got["verdict"] == "reproduced" and got["reason"] == "14.7 sigma, p 0.001"
    assert got["p"] == pytest.approx(2 * sps.t.sf(6 / (math.sqrt(2 / 3) / 2), 3))
    # the mechanism: mean over steps per run (0.1, 0.3 -> 0.2), then over seeds
    assert got["mechanism"][0]["treatment"] == pytest.approx(0.2)


def test_a_control_that_is_not_a_decided_tie_leaves_the_row_undecided(tmp_path):
    # the control: -1, +2, -1, -1 -> mean -0.25, se 0.75; its 90% interval [-2.0, +1.5] pokes out of +-2
    f = frame({TG: [0.50, 0.48, 0.49, 0.50], RG: [0.55, 0.55, 0.55, 0.56],
               CTG: [0.60, 0.62, 0.58, 0.60], CRG: [0.61, 0.60, 0.59, 0.61]})
    got = fd.evaluate_row(row(tmp_path), f, "store")
    assert got["verdict"] == "undecided" and "but the control is" in got["reason"]
    assert got["control_seeds_to_decide"] > 4


def test_opposite_sign_and_a_moving_control(tmp_path):
    f = frame({TG: [0.60, 0.62, 0.61], RG: [0.50, 0.51, 0.50],
               CTG: [0.60, 0.60, 0.61], CRG: [0.60, 0.605, 0.61]})  # a decided tie, not identical arms
    assert fd.evaluate_row(row(tmp_path), f, "store")["verdict"] == "opposite"
    moved = frame({TG: [0.60, 0.62, 0.61], RG: [0.50, 0.51, 0.50],
                   CTG: [0.70, 0.72, 0.71], CRG: [0.60, 0.61, 0.60]})
    got = fd.evaluate_row(row(tmp_path), moved, "store")
    assert got["verdict"] == "control moved" and got["reason"].startswith("control +10.7")


def test_a_tie_is_decided_only_by_the_tost(tmp_path):
    # d = +1, -1, +1, -1 -> mean 0, se 0.577, df 3: 90% interval +-1.36 inside +-2 (half of 4.0)
    tight = frame({TG: [0.51, 0.49, 0.51, 0.49], RG: [0.50] * 4, CTG: [0.5] * 4, CRG: [0.5] * 4})
    got = fd.evaluate_row(row(tmp_path), tight, "store")
    assert got["verdict"] == "tie" and got["decided"] and got["reason"].startswith("TOST p = ")
    assert got["margin"] == 2.0
    # at 80% power with t quantiles for 4 seeds the MDE is 4.16 SE, not 2 SE
    assert got["mde"] == pytest.approx(4.16 * math.sqrt(4 / 3) / 2, rel=0.01)
    loose = frame({TG: [0.60, 0.40, 0.55], RG: [0.50] * 3, CTG: [0.5] * 3, CRG: [0.5] * 3})
    got = fd.evaluate_row(row(tmp_path), loose, "store")
    assert got["verdict"] == "undecided" and "seeds would decide a tie" in got["reason"]
    same = frame({TG: [0.5] * 3, RG: [0.5] * 3, CTG: [0.5] * 3, CRG: [0.5] * 3})
    assert fd.evaluate_row(row(tmp_path), same, "store")["verdict"] == "tie"


def test_alpha_and_power_move_the_detectable_effect(tmp_path):
    f = frame({TG: [0.51, 0.49, 0.51, 0.49], RG: [0.50] * 4, CTG: [0.5] * 4, CRG: [0.5] * 4})
    plain = fd.evaluate_row(row(tmp_path), f, "store")
    strict = fd.evaluate_row(row(tmp_path), f, "store", levels=vd.Levels(alpha=0.01, power=0.9))
    assert strict["mde"] > plain["mde"] and (strict["alpha"], strict["power"]) == (0.01, 0.9)


def test_too_few_seeds_to_pair_falls_back_to_independent_means(tmp_path):
    f = frame({TG: [0.50, 0.52], RG: [0.40, 0.44], CTG: [0.5, 0.5], CRG: [0.5, 0.5]})
    got = fd.evaluate_row(row(tmp_path), f, "store")
    assert got["difference"] == pytest.approx(9.0)
    # se = sqrt(s_t^2 / 2 + s_b^2 / 2) with s_t^2 = 2, s_b^2 = 8 (points^2)
    assert got["se"] == pytest.approx(math.sqrt(2 / 2 + 8 / 2))
    assert fd.evaluate_row(row(tmp_path), None, "none")["verdict"] == "not run"


def test_slope_statistic(tmp_path):
    y, x = "eval/compacted/keys_per_episode", "eval/compacted/steps"
    text = ROW.replace('metric = "eval/compacted/success"', f'metric = "{y}"\nstatistic = "slope"\nx = "{x}"')
    text = text.replace("published = -4.0", "direction = 1.0\nmargin = 0.5")
    r = row(tmp_path, text)
    runs, hist = [], {}
    for arm, exponent in ((TG, 2.0), (RG, 1.0), (CTG, 1.0), (CRG, 1.0)):
        for h in (8, 16, 32):
            for seed in range(3):
                run_id = f"{arm},h={h}/{seed}"
                runs.append({"run_id": run_id, "status": "FINISHED", "variant": f"{arm},horizon={h}", "seed": seed})
                wobble = 0.01 * (seed - 1) if arm == CTG else 0.0  # a control that is a tie, not identical arms
                hist[run_id] = {x: [float(h)], y: [(1 + 0.01 * seed) * h**(exponent + wobble)]}
    f = SpecData(fdd.runs_from_histories(runs, hist, {y, x}))
    got = fd.evaluate_row(r, f, "store")
    assert got["difference"] == pytest.approx(1.0)  # quadratic minus linear
    assert got["verdict"] == "reproduced" and got["control_difference"] == pytest.approx(0.0, abs=1e-9)


def test_export_round_trip(tmp_path):
    f = frame({TG: [0.50, 0.48, 0.49], RG: [0.55, 0.55, 0.56], CTG: [0.6] * 3, CRG: [0.6] * 3})
    history = pl.DataFrame({"run_id": ["a"], "key": [METRIC], "step": [0], "value": [0.5]})
    data = SpecData(f.runs, history)
    paths = fdd.write_export("toy-finding", data, tmp_path)
    assert [p.name for p in paths] == ["toy-finding.csv", "toy-finding.history.parquet"]
    again = fdd.read_export("toy-finding", tmp_path)
    assert again is not None and again.history is not None and again.history.equals(history)
    r = row(tmp_path)
    assert fd.evaluate_row(r, again, "exports") == fd.evaluate_row(r, data, "exports")
    assert fdd.read_export("absent", tmp_path) is None
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(FindingsError, match="lacks the columns"):
        fdd.read_export("bad", tmp_path)


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: t.replace('id = "9"', 'id = "9"\ncolour = "red"'), "`findings\\[0\\].colour` is not a findings key"),
        (lambda t: t.replace('reduce = "mean"', 'reduce = "max"'), "reduce='max'` is invalid; choose one of"),
        (lambda t: t.replace('metric = "eval/compacted/success"',
                             'metric = "eval/compacted/keys_per_episode"\nstatistic = "slope"'),
         "a slope needs the metric it is taken against"),
        # issue 30: a typo or an empty name ended in a polars traceback
        (lambda t: t.replace('metric = "eval/compacted/success"', 'metric = "eval/compacted/sucess"', 1),
         "metric='eval/compacted/sucess'` is invalid; did you mean 'eval/compacted/success'"),
        (lambda t: t.replace('metric = "eval/compacted/success"', 'metric = ""', 1), "metric=''` is invalid"),
        (lambda t: t.replace('metric = "eval/compacted/success"',
                             'metric = "eval/compacted/keys_per_episode"\nstatistic = "slope"\nx = "stesp"', 1),
         "x='stesp'` is invalid; choose a metric the trainer logs"),
        (lambda t: t.replace('metric = "health/baseline_shift/mean"', 'metric = "health/baseline_shfit/mean"'),
         "metric='health/baseline_shfit/mean'` is invalid"),
        (lambda t: t.replace("published = -4.0", 'published = "big"'), "`findings\\[0\\].published='big'`"),
        (lambda t: t.replace('control_baseline = { task.preset = "zero", train.estimator = "rg" }', ""),
         "`findings\\[0\\].control_baseline` is required"),
    ],
)
def test_bad_rows_name_the_key(tmp_path, edit, match):
    with pytest.raises(FindingsError, match=match):
        row(tmp_path, edit(ROW))


def test_every_shipped_finding_row_parses_and_selects_existing_variants():
    from simlab.sweep.spec_parse import load_spec

    rows = fd.load_rows()
    assert {r.id[0] for r in rows} == {str(i) for i in range(1, 8)}  # findings 1-7, each with its rows
    assert len({r.id for r in rows}) == len(rows)
    questions = fd.load_rows(fd.SPEC_DIR.parent / "questions")  # the field's questions, same row format
    assert questions and all(r.id.startswith("Q") for r in questions)
    for r in [*rows, *questions]:
        spec = load_spec(r.spec_path)
        variants = [fa.settings(c.variant) for c in spec.cells()]
        for arm, selector in r.arms.items():
            assert any(all(v.get(k) in allowed for k, allowed in selector.items()) for v in variants), (r.id, arm)


def test_cli_reads_exports_and_refuses_bad_options(tmp_path):
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "toy.toml").write_text(ROW, encoding="utf-8")
    res = run_cli(["findings", "--specs", str(specs), "--source", "exports", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)[0]["verdict"] == "not run"
    assert run_cli(["findings", "--source", "cloud"]).exit_code == 2
    for flag, value in (("--alpha", "0.7"), ("--power", "0.2")):
        bad = run_cli(["findings", "--specs", str(specs), flag, value])
        assert bad.exit_code == 2 and f"`{flag}={float(value)!r}` is invalid" in bad.output
    bad = run_cli(["findings", "--specs", str(tmp_path / "absent")])
    assert bad.exit_code == 2 and "choose an existing folder" in bad.output


def test_a_control_expected_to_move_the_other_way(tmp_path):
    text = ROW.replace('metric = "eval/compacted/success"', 'metric = "eval/compacted/success"\n'
                       'control_expect = "not-published-sign"')
    r = row(tmp_path, text)
    up = frame({TG: [0.40, 0.41, 0.40], RG: [0.50, 0.51, 0.50], CTG: [0.70, 0.72, 0.71], CRG: [0.60, 0.61, 0.60]})
    assert fd.evaluate_row(r, up, "store")["verdict"] == "reproduced"  # the control rose: not the finding's way
    down = frame({TG: [0.40, 0.41, 0.40], RG: [0.50, 0.51, 0.50], CTG: [0.50, 0.52, 0.51], CRG: [0.60, 0.61, 0.60]})
    assert fd.evaluate_row(r, down, "store")["verdict"] == "control moved"
    # an undecided control never settles a row, whichever way the row expects it to go
    main = _judged(-6.0, 0.8)
    for control in (_judged(0.5, 0.9), _judged(-0.5, 0.9)):  # neither significant nor a decided tie
        assert vd.verdict(r, main, control).by == "control"
    assert vd.verdict(r, main, TIED_CONTROL).verdict == "reproduced"
    assert vd.verdict(r, main, _judged(6.0, 0.8)).verdict == "reproduced"  # moved the other way
    with pytest.raises(FindingsError, match="control_expect='sideways'"):
        row(tmp_path, ROW.replace('id = "9"', 'id = "9"\ncontrol_expect = "sideways"'))


HELD_OUT = """
name = "toy-held-out"
seeds = [0, 1, 2]
sampler = "grid"
[base]
train.recipe = "supo"
eval.episodes = 100
[space]
task.preset = ["peekread-pos", "peekread-zero"]
train.steps = [0, 20]
[objective]
metric = "eval/single_window/success"
[[findings]]
id = "6"
finding = "a train-serve toy"
published = -3.8
metric = "eval/compacted/success"
treatment = { task.preset = "peekread-pos", train.steps = 20 }
baseline = { task.preset = "peekread-pos", train.steps = 0 }
control_treatment = { task.preset = "peekread-zero", train.steps = 20 }
control_baseline = { task.preset = "peekread-zero", train.steps = 0 }
"""


def test_a_shared_held_out_set_bounds_the_instance_term(tmp_path):
    text = HELD_OUT.replace("eval.episodes = 100", "eval.episodes = 100\neval.seed = 1000000\nbase.seed = 0")
    r = row(tmp_path, text)
    spec = fs.design(r)
    assert (spec.episodes, spec.base_fixed, spec.eval_fixed) == (100, True, True)
    pos, zero = "task.preset=peekread-pos,train.steps=", "task.preset=peekread-zero,train.steps="
    f = frame({pos + "20": [0.0] * 3, pos + "0": [0.2] * 3, zero + "20": [0.30, 0.31, 0.29], zero + "0": [0.3] * 3})
    got = fd.evaluate_row(r, f, "store")
    # the trained arm fails every episode: the bound on the instance term is exact, the baseline's binomial SE
    assert got["se_from"] == "rates-bound" and got["se"] == pytest.approx(100 * math.sqrt(0.2 * 0.8 / 100))
    assert got["conditional"] == "conditional on one base model and one held-out set"
    compact = " ".join(findings_text.to_compact(fd.Findings([got], {})).split())  # the row's line wraps
    assert "[conditional on one base model and one held-out set]" in compact
    own = fs.design(row(tmp_path, HELD_OUT))  # sweeps vary both by default
    assert (own.base_fixed, own.eval_fixed, own.seeds_vary) == (False, False, "base model, held-out set, RL sampling")
    toy = row(tmp_path)  # presets that do not resolve: read conservatively, as holding both fixed
    assert fs.design(toy).episodes is None and fs.design(toy).conditional


def test_the_compact_table_fits_110_columns():
    found = fd.gather(fd.load_rows(), source="exports")
    for line in findings_text.to_compact(found).splitlines():
        assert len(line) <= findings_text.WIDTH, line
    assert "| 7c" in findings_text.to_compact(found) and "check" in findings_text.to_compact(found)


def test_an_export_written_with_leaf_labels_reads_as_the_key_path_one(tmp_path):
    """Exports committed before labels used key paths (``preset=peekread-pos,steps=0``) give the same rows:
    the labels are read against the spec's axes."""
    rows = [r for r in fd.load_rows() if r.spec == "finding-train-serve"]
    for name, path in fdd.export_paths("finding-train-serve").items():
        if name != "runs" and path.is_file():
            (tmp_path / path.name).write_bytes(path.read_bytes())
    runs = pl.read_csv(fdd.export_paths("finding-train-serve")["runs"], infer_schema_length=None)
    assert set(runs.get_column("variant")) >= {"task.preset=peekread-pos,train.steps=0"}
    leafy = runs.with_columns(pl.col("variant").str.replace_all(r"(task|train)\.", ""))
    assert set(leafy.get_column("variant")) >= {"preset=peekread-pos,steps=0"}
    leafy.write_csv(tmp_path / "finding-train-serve.csv")
    old, new = fd.gather(rows, source="exports", exports=tmp_path), fd.gather(rows, source="exports")
    assert json.dumps(old.rows, default=str) == json.dumps(new.rows, default=str)
    assert old.rows[0]["difference"] is not None


def test_an_area_asked_of_runs_with_one_evaluation_names_the_row(tmp_path):
    auc = 'metric = "eval/compacted/success"\nstatistic = "auc"'
    r = row(tmp_path, ROW.replace('metric = "eval/compacted/success"', auc))
    f = frame({TG: [0.5] * 3, RG: [0.5] * 3, CTG: [0.5] * 3, CRG: [0.5] * 3})
    one = pl.DataFrame({"run_id": f.runs.get_column("run_id"), "key": METRIC, "step": 0, "value": 0.5})
    with pytest.raises(FindingsError, match=r"toy.toml: `findings.9.statistic='auc'` is invalid; an area needs"):
        fd.evaluate_row(r, SpecData(f.runs, one), "store")
    two = pl.concat([one, one.with_columns(pl.lit(4).alias("step"), pl.lit(0.75).alias("value"))])
    assert fd.evaluate_row(r, SpecData(f.runs, two), "store")["difference"] == pytest.approx(0.0)


def test_a_bad_statistic_or_threshold_names_the_key(tmp_path):
    with pytest.raises(FindingsError, match="statistic='median'` is invalid; choose one of"):
        row(tmp_path, ROW.replace('id = "9"', 'id = "9"\nstatistic = "median"'))
    with pytest.raises(FindingsError, match="threshold=None` is invalid; steps_to needs"):
        row(tmp_path, ROW.replace('id = "9"', 'id = "9"\nstatistic = "steps_to"'))


def test_dose_rows_draw_a_dose_response_figure(tmp_path):
    rows = []
    for dose, shift in ((0.25, 0.0), (0.5, 0.03), (1.0, 0.08)):
        text = ROW.replace('id = "9"', f'id = "9"\ndose = {dose}\ndose_label = "coupling c"\ncontrol_dose = 0.0')
        f = frame({TG: [0.50 - shift, 0.49 - shift, 0.51 - shift], RG: [0.50, 0.50, 0.51],
                   CTG: [0.5] * 3, CRG: [0.5] * 3})
        rows.append(fd.evaluate_row(row(tmp_path, text), f, "store"))
    assert [r["dose"] for r in rows] == [0.25, 0.5, 1.0] and rows[0]["dose_label"] == "coupling c"
    out = tmp_path / "figs"
    out.mkdir()
    paths = fd.dose_figures(fd.Findings(rows, {}), out)
    assert [p.name for p in paths] == ["toy-finding-final.png"] and paths[0].stat().st_size > 5000
    auc = [{**r, "statistic": "auc"} for r in rows]  # a second outcome of the same doses: its own figure
    paths = fd.dose_figures(fd.Findings([*rows, *auc], {}), out)
    assert [p.name for p in paths] == ["toy-finding-final.png", "toy-finding-auc.png"]
    with pytest.raises(FindingsError, match="dose='high'"):
        row(tmp_path, ROW.replace('id = "9"', 'id = "9"\ndose = "high"'))


def test_a_superseded_row_stays_marked_and_names_its_successors(tmp_path):
    r = row(tmp_path, ROW.replace('id = "9"', 'id = "9"\nsuperseded_by = "9c-1, 9c-2 (findings/toy-dose)"'))
    assert r.superseded_by == "9c-1, 9c-2 (findings/toy-dose)"
    got = fd.evaluate_row(r, None, "none")
    compact = findings_text.to_compact(fd.Findings([got], {}))
    assert "| 9†" in compact and "(superseded by 9c-1, 9c-2 (findings/toy-dose))" in " ".join(compact.split())
    assert "superseded by 9c-1" in findings_text.to_markdown(fd.Findings([got], {}))
    assert [x.id for x in sorted([r.model_copy(update={"id": i}) for i in ("2a", "1d-32", "1d-4-final", "1d-4", "1a")],
                                 key=lambda x: fd._natural(x.id))] == ["1a", "1d-4", "1d-4-final", "1d-32", "2a"]


def _judged(mean: float, se: float, df: float = 7, margin: float | None = 2.0) -> Judgement:
    return compare.judge(Estimate(mean, se, df, int(df) + 1, 0, "seeds"), margin=margin)


TIED_CONTROL = _judged(0.0, 0.2)  # its 90% interval +-0.38 lies inside +-2: a decided tie


@pytest.mark.parametrize(
    ("mean", "se", "family_p", "verdict", "by"),
    [
        # -6 +- 0.8 at df 7: p 0.0001, 90% interval [-7.5, -4.5] wholly beyond -2
        (-6.0, 0.8, None, "reproduced", ""),
        # the 4c30 shape: -0.54 +- 0.15, p 0.009, but [-0.82, -0.26] lies inside +-2: a tie with a lean
        (-0.54, 0.15, None, "tie", ""),
        # ... and with no direction after Holm, the same
        (-0.54, 0.15, 0.127, "tie", ""),
        # the other sign inside the margin reads the same: a negligible difference claims no direction
        (0.54, 0.15, None, "tie", ""),
        # -3 +- 0.8: p 0.007, but [-4.5, -1.5] reaches inside -2: its size is not told
        (-3.0, 0.8, None, "undecided", "size"),
        # reproduced on its own, not after its family's Holm adjustment
        (-6.0, 0.8, 0.08, "undecided", "adjustment"),
        (6.0, 0.8, None, "opposite", ""),
        (6.0, 0.8, 0.2, "undecided", "adjustment"),
        # 2.2 SE at df 7 is p 0.064: neither significant nor a tie
        (-2.2, 1.0, None, "undecided", "main"),
    ],
)
def test_the_verdict_ladder(tmp_path, mean: float, se: float, family_p: float | None, verdict: str, by: str) -> None:
    family = None if family_p is None else vd.Family(family_p, 15, "credit-dose")
    got = vd.verdict(row(tmp_path), _judged(mean, se), TIED_CONTROL, family)
    assert (got.verdict, got.by) == (verdict, by)
    if by == "size":
        # the seeds that bring the 90% interval beyond the margin, from the per-seed SD 0.8 sqrt(8)
        assert got.seeds == power.seeds_for_effect(0.8 * math.sqrt(8), 1.0)
    if family is not None:
        assert f"Holm p {family_p:.3f} over 15 rows of credit-dose" in got.reason


def test_a_harness_check_holds_and_never_reads_reproduced(tmp_path) -> None:
    check = row(tmp_path, ROW.replace('finding = "a toy"', 'finding = "a toy"\nkind = "harness check"'))
    assert vd.verdict(check, _judged(-6.0, 0.8), TIED_CONTROL).verdict == "holds"
    assert vd.verdict(check, _judged(6.0, 0.8), TIED_CONTROL).verdict == "fails"


def test_holm_families_are_one_campaign_and_leave_checks_out(tmp_path) -> None:
    one = row(tmp_path)
    other = row(tmp_path, ROW.replace('finding = "a toy"', 'finding = "a toy"\ncampaign = "other"'))
    check = row(tmp_path, ROW.replace('finding = "a toy"', 'finding = "a toy"\nkind = "harness check"'))
    got = [fd.Measured(_judged(m, se), TIED_CONTROL, []) for m, se in ((-6.0, 0.8), (-2.9, 1.0), (-5.0, 1.0))]
    fams = fd.families([one, one, check], got)
    p0, p1 = got[0].main.p, got[1].main.p  # type: ignore[union-attr]
    assert fams[2] is None  # a check is no test of a published claim
    assert (fams[0].size, fams[0].name) == (2, "toy-finding")  # type: ignore[union-attr]
    assert fams[0].p == pytest.approx(2 * p0) and fams[1].p == pytest.approx(max(2 * p0, p1))  # type: ignore[union-attr]
    split = fd.families([one, other], got[:2])
    assert [f.size for f in split] == [1, 1]  # type: ignore[union-attr]


def _cli_on(specs: Path, *texts: str):
    specs.mkdir()
    for i, text in enumerate(texts):
        (specs / f"toy{i}.toml").write_text(text, encoding="utf-8")
    before = {p.name: p.read_bytes() for p in specs.iterdir()}
    result = run_cli(["findings", "--specs", str(specs), "--source", "exports"])
    assert {p.name: p.read_bytes() for p in specs.iterdir()} == before
    return result


def test_two_rows_with_one_id_are_refused(tmp_path):
    """Issue 30: both used to be listed."""
    res = _cli_on(tmp_path / "specs", ROW, ROW.replace("toy-finding", "other-finding"))
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and "toy1.toml: `findings.id='9'` is invalid" in line, line
    assert "already the id of a row in toy0.toml" in line, line


def test_a_steps_to_threshold_no_rate_reaches_is_refused_as_report_threshold_is(tmp_path):
    """200 points on a success rate used to censor every run and read "tie"; the report refuses it too."""
    text = ROW.replace('id = "9"', 'id = "9"\nstatistic = "steps_to"\nthreshold = 200')
    res = _cli_on(tmp_path / "specs", text)
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and "threshold=200.0` is invalid; choose a success level in [0, 100] points" in line, line
    from simlab.cli.analysis import report_levels
    from simlab.errors import ConfigError

    with pytest.raises(ConfigError, match=r"`--threshold=200.0` is invalid; choose a success level in \[0, 100\]"):
        report_levels(2.0, 0.05, 0.8, threshold=200.0)  # simlab report --threshold's check: the same rule
    row(tmp_path, text.replace("threshold = 200", "threshold = 100"))  # the bound itself is a level
    other = text.replace('metric = "eval/compacted/success"', 'metric = "eval/compacted/keys_per_episode"')
    assert row(tmp_path, other).threshold == 200  # not a rate: its own unit, no bound


def test_figures_that_is_a_file_names_figures(tmp_path):
    """Issue 30: the error used to name --out, an option findings does not have."""
    target = tmp_path / "figure.png"
    target.write_bytes(b"a user's file")
    res = run_cli(["findings", "--source", "exports", "--figures", str(target)])
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and f"`--figures='{target}'` is invalid; choose an existing folder" in line, line
    assert "--out" not in line and target.read_bytes() == b"a user's file"


GRID_ROW = """
name = "toy-grid"
seeds = [0]
[base]
task.preset = "peekread-routes-c50"
[space]
train.estimator = ["rollout_group", "trajectory_group"]
[objective]
metric = "eval/compacted/success"
[[findings]]
id = "9"
finding = "a toy"
published = -4.0
metric = "eval/compacted/success"
treatment = { train.estimator = "trajectory_group" }
baseline = { train.estimator = "rollout_group" }
control_treatment = { train.estimator = "trajectory_group" }
control_baseline = { "train.estimator" = "rollout_group" }
"""


def test_an_arm_selects_by_key_path_dotted_or_quoted_and_a_leaf_key_is_refused(tmp_path):
    """Arms spell settings as the labels do; TOML's dotted keys nest (``{ train.estimator = ... }`` is
    ``{ train = { estimator = ... } }``), and the arm reads both it and the quoted key as one key path."""
    rows = [row(tmp_path, GRID_ROW)]
    assert rows[0].treatment == {"train.estimator": ("trajectory_group",)}
    assert rows[0].control_baseline == {"train.estimator": ("rollout_group",)}
    res = _cli_on(tmp_path / "specs", GRID_ROW.replace('treatment = { train.estimator = "trajectory_group" }',
                                                       'treatment = { estimator = "trajectory_group" }', 1))
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert line.endswith("toy0.toml: `findings.treatment.estimator` is not a key path; write `train.estimator` "
                         "(a label spells each setting by its key path, as --set does)"), line
    res = _cli_on(tmp_path / "other", GRID_ROW.replace('treatment = { train.estimator = "trajectory_group" }',
                                                       'treatment = { train.lr = 0.1 }', 1))
    assert res.exit_code == 2, res.output
    assert "`findings.treatment.train.lr` is no setting the spec sweeps (row 9); choose one of " \
        "['train.estimator']" in res.output


def test_a_misspelt_value_in_an_arm_s_list_is_refused(tmp_path):
    """One of a list that matches nothing would pool fewer runs than the row says (the whole arm still
    selects the other value's runs, so the arm check alone let it pass)."""
    res = _cli_on(tmp_path / "specs", GRID_ROW.replace('treatment = { train.estimator = "trajectory_group" }',
                                                       'treatment = { train.estimator = ["trajectory_group", '
                                                       '"trajectroy_group"] }'))
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and "`findings.treatment.train.estimator='trajectroy_group'` is invalid" in line, line
    assert "no variant of the spec (row 9) with the arm's other settings has train.estimator=trajectroy_group" in line


def test_an_arm_that_selects_no_variant_is_refused(tmp_path):
    """Issue 30: a misspelt arm value read "not run: fewer than 2 seeds in an arm" beside the runs."""
    assert _cli_on(tmp_path / "good", GRID_ROW).exit_code == 0
    res = _cli_on(tmp_path / "specs", GRID_ROW.replace('baseline = { train.estimator = "rollout_group" }',
                                                       'baseline = { train.estimator = "rollout_grop" }'))
    assert res.exit_code == 2, res.output
    line = res.output.strip()
    assert "\n" not in line and "toy0.toml: `findings.baseline='train.estimator = rollout_grop'` is invalid" in line
    assert "select a variant of the spec (row 9); it runs train.estimator=rollout_group; " \
        "train.estimator=trajectory_group" in line


def test_a_control_by_construction_never_decides_a_direction(tmp_path) -> None:
    declared = row(tmp_path, ROW.replace('finding = "a toy"', 'finding = "a toy"\ncontrol_by_construction = "K = 1"'))
    identical = compare.judge(Estimate(0.0, 0.0, 7, 8, 0, "seeds"), margin=2.0)  # the same on every seed
    got = vd.verdict(declared, _judged(-6.0, 0.8), identical)
    assert (got.verdict, got.by) == ("undecided", "construction") and "control by construction (K = 1)" in got.reason
    assert vd.verdict(declared, _judged(-6.0, 0.8), None).by == "construction"  # declared, not yet measured
    # declared, but its arms differ in the data: no control by construction, judged as any control
    assert vd.by_construction(declared, TIED_CONTROL) == ""
    assert vd.verdict(declared, _judged(-6.0, 0.8), TIED_CONTROL).verdict == "reproduced"
    loose = _judged(0.5, 0.9)  # neither moved nor a decided tie
    assert vd.verdict(declared, _judged(-6.0, 0.8), loose).by == "control"
    for mean in (-6.0, 6.0):
        assert vd.verdict(row(tmp_path), _judged(mean, 0.8), identical).by == "construction"
    assert vd.verdict(row(tmp_path), _judged(-0.54, 0.15), identical).verdict == "tie"  # negligible: no direction
    assert vd.verdict(row(tmp_path), _judged(0.0, 0.2), identical).verdict == "tie"  # a tie needs no control
    check = row(tmp_path, ROW.replace('finding = "a toy"', 'finding = "a toy"\nkind = "harness check"'))
    assert vd.verdict(check, _judged(-6.0, 0.8), identical).verdict == "holds"  # a check is no finding
    f = frame({TG: [0.50, 0.48, 0.49, 0.50], RG: [0.55, 0.55, 0.55, 0.56], CTG: [0.6] * 4, CRG: [0.6] * 4})
    record = fd.evaluate_row(row(tmp_path), f, "store")
    assert record["control_by_construction"] == "its arms are identical on every seed"
    assert "‡" in findings_text.to_compact(fd.Findings([record], {}))


def test_a_holm_family_counts_every_pre_registered_row_not_yet_run_at_p_1(tmp_path) -> None:
    one = row(tmp_path)
    got = [fd.Measured(_judged(-6.0, 0.8), TIED_CONTROL, []), None, fd.Measured(None, None, [])]
    fams = fd.families([one, one, one], got)
    p0 = got[0].main.p  # type: ignore[union-attr]
    assert [f.size for f in fams] == [3, 3, 3]  # type: ignore[union-attr]
    assert fams[0].p == pytest.approx(3 * p0) and fams[1].p == 1.0  # type: ignore[union-attr]


CURVE_SPEC = """
name = "toy-curve"
seeds = [0]
[base]
eval.single_window = true
eval.curve_single_window = false
[space]
train.estimator = ["rollout_group", "trajectory_group"]
[[findings]]
id = "9"
finding = "a toy"
published = -4.0
metric = "eval/single_window/success"
statistic = "auc"
treatment = { train.estimator = "trajectory_group" }
baseline = { train.estimator = "rollout_group" }
control_treatment = { train.estimator = "trajectory_group" }
control_baseline = { train.estimator = "rollout_group" }
[objective]
metric = "eval/compacted/success"
direction = "maximize"
"""


def test_a_curve_statistic_on_a_design_that_logs_one_evaluation_is_refused(tmp_path) -> None:
    with pytest.raises(FindingsError, match=r"toy.toml: `findings.9.statistic='auc'` is invalid; its spec "
                                            r"'toy-curve' evaluates eval/single_window/success 1 time"):
        row(tmp_path, CURVE_SPEC)
    assert row(tmp_path, CURVE_SPEC.replace('"auc"', '"final"')).statistic == "final"
    assert row(tmp_path, CURVE_SPEC.replace("single_window/success", "compacted/success")).statistic == "auc"
    result = _cli_on(tmp_path / "specs", CURVE_SPEC)
    assert result.exit_code == 2 and len(result.output.strip().splitlines()) == 1
    assert "statistic='auc'" in result.output


def test_findings_name_the_seeds_whose_base_is_at_its_floor() -> None:
    from simlab import names as n
    from simlab.analysis.report.bases import bases_lines, bases_of

    runs = pl.DataFrame({"run_id": ["a", "b", "c", "d"], "variant": ["x", "y", "x", "y"], "seed": [20, 20, 21, 21]})
    rows = []
    for run_id, seed in (("a", 20), ("b", 20), ("c", 21), ("d", 21)):
        base, floor, se = (0.6, 0.2, 0.05) if seed == 20 else (0.21, 0.2, 0.04)  # seed 21 at its floor
        metrics = {n.metric(n.BASE_HELDOUT, n.SUCCESS): base, n.metric(n.BASE_HELDOUT_FLOOR, n.SUCCESS): floor,
                   n.metric(n.BASE_HELDOUT_TEACHER, n.SUCCESS): 0.65, n.BASE_GAIN: base - floor, n.BASE_GAIN_SE: se,
                   n.BASE_ABOVE_FLOOR: float(base - floor > 2 * se), n.BASE_TEACHER_LEAD: 0.65 - base}
        rows += [{"run_id": run_id, "key": k, "step": 0, "value": v} for k, v in metrics.items()]
        rows.append({"run_id": run_id, "key": "eval/compacted/success", "step": 5, "value": 0.5})
    table = bases_of(runs, pl.DataFrame(rows))
    assert table is not None and table.height == 2 and "variant" not in table.columns  # one base per seed
    assert bases_lines({"spec": table}) == [
        "bases of spec: 1 of 2 bases clearly above their floor; 1 of 2 within 10 points of their teacher; "
        "at floor: seeds 21"]
    assert bases_of(runs, pl.DataFrame([r for r in rows if not r["key"].startswith("base/")])) is None


def test_committed_exports_predate_the_base_measurement() -> None:
    found = fd.gather(fd.load_rows(), source="exports")
    assert found.bases == {}  # no committed sweep measured its bases: the findings text is as before


def test_an_export_records_when_each_run_ran() -> None:
    """Anyone can check a spec's commit against its first run: the per-run table keeps start and end (UTC)."""
    runs = [{"run_id": "a", "status": "FINISHED", "variant": "v", "seed": 0, "start_time": 1_796_000_000_000,
             "end_time": 1_796_000_090_500},
            {"run_id": "b", "status": "FINISHED", "variant": "v", "seed": 1}]
    table = fdd.runs_from_histories(runs, {"a": {METRIC: [0.5]}, "b": {METRIC: [0.4]}}, {METRIC})
    assert table["start_time"].to_list() == ["2026-11-30T00:53:20+00:00", None]
    assert table["end_time"].to_list() == ["2026-11-30T00:54:50+00:00", None]
