"""``simlab findings``: verdict rules on hand-made runs, slopes, exports, and bad rows."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from simlab.analysis import findings as fd
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
treatment = { preset = "neg", estimator = "tg" }
baseline = { preset = "neg", estimator = "rg" }
control_treatment = { preset = "zero", estimator = "tg" }
control_baseline = { preset = "zero", estimator = "rg" }
mechanism = [{ metric = "health/baseline_shift/mean", reduce = "mean", label = "shift" }]
"""


def row(tmp_path: Path, text: str = ROW) -> fd.FindingRow:
    path = tmp_path / "toy.toml"
    path.write_text(text, encoding="utf-8")
    return fd.parse_rows(path)[0]


def frame(arms: dict[str, list[float]], shift: float = 0.1):
    """Runs of four arms; ``arms`` maps a variant label to the final success of seeds 0, 1, 2, ..."""
    runs, hist = [], {}
    for variant, finals in arms.items():
        for seed, final in enumerate(finals):
            run_id = f"{variant}/{seed}"
            runs.append({"run_id": run_id, "status": "FINISHED", "variant": variant, "seed": seed})
            hist[run_id] = {METRIC: [0.25, final], "health/baseline_shift/mean": [shift, 3 * shift]}
    runs.append({"run_id": "x", "status": "FAILED", "variant": "preset=neg,estimator=tg", "seed": 9})
    return fd.runs_from_histories(runs, hist, {METRIC, "health/baseline_shift/mean"})


TG, RG = "preset=neg,estimator=tg", "preset=neg,estimator=rg"
CTG, CRG = "preset=zero,estimator=tg", "preset=zero,estimator=rg"


def test_reproduced_when_the_sign_matches_at_two_sigma_and_the_control_ties(tmp_path):
    # paired differences -5, -7, -6, -6 points: mean -6, s_d = sqrt(2/3), se = s_d / 2 -> about -14.7 sigma
    f = frame({TG: [0.50, 0.48, 0.49, 0.50], RG: [0.55, 0.55, 0.55, 0.56],
               CTG: [0.60, 0.62, 0.58, 0.60], CRG: [0.61, 0.60, 0.59, 0.61]})
    got = fd.evaluate_row(row(tmp_path), f, "store")
    assert got["difference"] == pytest.approx(-6.0)
    assert got["se"] == pytest.approx(math.sqrt(2 / 3) / 2)
    assert got["paired"] and got["seeds"] == 4
    assert got["verdict"] == "reproduced"
    assert abs(got["control_sigma"]) < 2  # control: -1, +2, -1, -1 -> mean -0.25, se 0.75
    # the mechanism: mean over steps per run (0.1, 0.3 -> 0.2), then over seeds
    assert got["mechanism"][0]["treatment"] == pytest.approx(0.2)


def test_opposite_sign_and_a_moving_control(tmp_path):
    f = frame({TG: [0.60, 0.62, 0.61], RG: [0.50, 0.51, 0.50],
               CTG: [0.61, 0.60, 0.62], CRG: [0.60, 0.60, 0.61]})
    assert fd.evaluate_row(row(tmp_path), f, "store")["verdict"] == "opposite"
    moved = frame({TG: [0.60, 0.62, 0.61], RG: [0.50, 0.51, 0.50],
                   CTG: [0.70, 0.72, 0.71], CRG: [0.60, 0.61, 0.60]})
    got = fd.evaluate_row(row(tmp_path), moved, "store")
    assert got["verdict"] == "control moved" and got["reason"].startswith("control +10.7")


def test_a_tie_is_decided_only_when_its_mde_is_at_most_half_the_published_delta(tmp_path):
    # d = +1, -1, +1, -1 -> mean 0, s_d = sqrt(4/3), se = s_d / 2 = 0.577, MDE 1.15 <= 2.0 (half of 4.0)
    tight = frame({TG: [0.51, 0.49, 0.51, 0.49], RG: [0.50] * 4, CTG: [0.5] * 4, CRG: [0.5] * 4})
    got = fd.evaluate_row(row(tmp_path), tight, "store")
    assert got["verdict"] == "tie" and got["mde"] == pytest.approx(2 * math.sqrt(4 / 3) / 2)
    assert got["reason"].startswith("decided: MDE 1.2 <= 2.0")
    loose = frame({TG: [0.60, 0.40, 0.55], RG: [0.50] * 3, CTG: [0.5] * 3, CRG: [0.5] * 3})
    assert fd.evaluate_row(row(tmp_path), loose, "store")["reason"].startswith("undecided")
    same = frame({TG: [0.5] * 3, RG: [0.5] * 3, CTG: [0.5] * 3, CRG: [0.5] * 3})
    assert fd.evaluate_row(row(tmp_path), same, "store")["reason"] == "the arms were identical in every seed"


def test_too_few_seeds_to_pair_falls_back_to_independent_means(tmp_path):
    f = frame({TG: [0.50, 0.52], RG: [0.40, 0.44], CTG: [0.5, 0.5], CRG: [0.5, 0.5]})
    got = fd.evaluate_row(row(tmp_path), f, "store")
    assert not got["paired"] and got["difference"] == pytest.approx(9.0)
    # se = sqrt(s_t^2 / 2 + s_b^2 / 2) with s_t^2 = 2, s_b^2 = 8 (points^2)
    assert got["se"] == pytest.approx(math.sqrt(2 / 2 + 8 / 2))
    assert fd.evaluate_row(row(tmp_path), None, "none")["verdict"] == "not run"


def test_slope_statistic(tmp_path):
    text = ROW.replace('metric = "eval/compacted/success"', 'metric = "cost"\nstatistic = "slope"\nx = "steps"')
    text = text.replace("published = -4.0", "direction = 1.0")
    r = row(tmp_path, text)
    runs, hist = [], {}
    for arm, power in ((TG, 2.0), (RG, 1.0), (CTG, 1.0), (CRG, 1.0)):
        for h in (8, 16, 32):
            for seed in range(3):
                run_id = f"{arm},h={h}/{seed}"
                runs.append({"run_id": run_id, "status": "FINISHED", "variant": f"{arm},horizon={h}", "seed": seed})
                hist[run_id] = {"steps": [float(h)], "cost": [(1 + 0.01 * seed) * h**power]}
    f = fd.runs_from_histories(runs, hist, {"cost", "steps"})
    got = fd.evaluate_row(r, f, "store")
    assert got["difference"] == pytest.approx(1.0)  # quadratic minus linear
    assert got["verdict"] == "reproduced" and got["control_difference"] == pytest.approx(0.0)


def test_export_round_trip(tmp_path):
    f = frame({TG: [0.50, 0.48, 0.49], RG: [0.55, 0.55, 0.56], CTG: [0.6] * 3, CRG: [0.6] * 3})
    path = tmp_path / "toy-finding.csv"
    f.write_csv(path)
    again = fd.read_export(path)
    r = row(tmp_path)
    assert fd.evaluate_row(r, again, str(path)) == fd.evaluate_row(r, f, str(path))
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    with pytest.raises(fd.FindingsError, match="lacks the columns"):
        fd.read_export(tmp_path / "bad.csv")


@pytest.mark.parametrize(
    ("edit", "match"),
    [
        (lambda t: t.replace('id = "9"', 'id = "9"\ncolour = "red"'), "`findings\\[0\\].colour='red'` is invalid"),
        (lambda t: t.replace('reduce = "mean"', 'reduce = "max"'), "reduce='max'` is invalid; choose one of"),
        (lambda t: t.replace('metric = "eval/compacted/success"', 'metric = "c"\nstatistic = "slope"'),
         "a slope needs the metric it is taken against"),
        (lambda t: t.replace("published = -4.0", 'published = "big"'), "`findings\\[0\\].published='big'`"),
        (lambda t: t.replace('control_baseline = { preset = "zero", estimator = "rg" }', ""),
         "control_baseline=None"),
    ],
)
def test_bad_rows_name_the_key(tmp_path, edit, match):
    with pytest.raises(fd.FindingsError, match=match):
        row(tmp_path, edit(ROW))


def test_every_shipped_finding_row_parses_and_selects_existing_variants():
    from simlab.sweep.spec import load_spec

    rows = fd.load_rows()
    assert {r.id.rstrip("abc") for r in rows} == {str(i) for i in range(1, 8)}
    for r in rows:
        spec = load_spec(r.spec_path)
        variants = [fd.settings(c.variant) for c in spec.cells()]
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
    with pytest.raises(fd.FindingsError, match="control_expect='sideways'"):
        row(tmp_path, ROW.replace('id = "9"', 'id = "9"\ncontrol_expect = "sideways"'))


HELD_OUT = """
name = "toy-held-out"
seeds = [0, 1, 2]
sampler = "grid"
[base]
recipe = "supo"
[base.overrides]
eval.episodes = 100
[space]
preset = ["peekread-pos", "peekread-zero"]
train.steps = [0, 20]
[objective]
metric = "eval/single_window/success"
[[findings]]
id = "6"
finding = "a train-serve toy"
published = -3.8
metric = "eval/compacted/success"
treatment = { preset = "peekread-pos", steps = 20 }
baseline = { preset = "peekread-pos", steps = 0 }
control_treatment = { preset = "peekread-zero", steps = 20 }
control_baseline = { preset = "peekread-zero", steps = 0 }
"""


def test_a_rate_difference_the_same_in_every_seed_gets_the_held_out_sets_se(tmp_path):
    r = row(tmp_path, HELD_OUT)
    assert fd.held_out_episodes(r) == 100  # eval.episodes of the spec's grid points
    f = frame({"preset=peekread-pos,steps=20": [0.0] * 3, "preset=peekread-pos,steps=0": [0.2] * 3,
               "preset=peekread-zero,steps=20": [0.30, 0.31, 0.29], "preset=peekread-zero,steps=0": [0.3] * 3})
    got = fd.evaluate_row(r, f, "store")
    # the trained arm fails every episode: the difference's SE is the baseline's binomial SE on 100
    assert got["se_from"] == "held-out" and got["se"] == pytest.approx(100 * math.sqrt(0.2 * 0.8 / 100))
    assert got["verdict"] == "reproduced" and got["reason"] == "5.0 sigma"
    assert got["control_se_from"] == "paired"
    assert "same in every seed: SE of the held-out set" in fd.to_markdown(fd.Findings([got], {}))
    toy = row(tmp_path)  # presets that do not resolve: no bound, the seed SE of 0 stands
    assert fd.held_out_episodes(toy) is None
