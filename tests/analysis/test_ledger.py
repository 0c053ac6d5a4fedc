"""The ledger: claims as data in the specs, decided from the exports, and docs that say what it says."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from simlab.analysis.ledger import (
    FAILED,
    HELD,
    MET,
    MISSED,
    NOT_TESTED,
    UNDECIDED,
    decide,
    evaluate,
    ledger,
    ledger_markdown,
    per_seed,
)
from simlab.analysis.replication.data import EXPORT_DIR
from simlab.errors import SpecError
from simlab.sweep.predictions import Precondition, Prediction
from simlab.sweep.spec_parse import load_claims, parse_spec

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
STATEMENT = re.compile(r"(prediction|precondition)(?: (\w+))? of ([a-z0-9-]+): "
                       r"(held|failed|undecided|not tested|met|missed)")
"""How the docs cite a claim's status: ``prediction 1a of summaries-length: failed``."""


def _prediction(**kw):
    base = dict(id="1", text="t", arm="a", metric="m", step=2, comparison=">=", threshold=0.5,
                transcribed="before the run")
    return Prediction(**{**base, **kw})


def _data():
    runs = pl.DataFrame({"run_id": ["r1", "r2", "r3", "s1", "s2", "s3"],
                         "variant": ["variant=a"] * 3 + ["variant=b"] * 3, "seed": [1, 2, 3, 1, 2, 3]})
    rows = []
    for run, v0, v2 in (("r1", 0.0, 1.0), ("r2", 0.1, 0.2), ("r3", 0.0, 0.9),
                        ("s1", 0.0, 0.5), ("s2", 0.0, 0.5), ("s3", 0.0, 0.5)):
        rows += [(run, "m", 0, v0), (run, "m", 2, v2)]
    history = pl.DataFrame(rows, schema=["run_id", "key", "step", "value"], orient="row")
    return runs, history


def test_per_seed_reads_a_level_a_change_and_a_paired_difference_by_hand():
    runs, history = _data()
    assert per_seed(runs, history, _prediction()) == {1: 1.0, 2: 0.2, 3: 0.9}
    change = per_seed(runs, history, _prediction(from_step=0))
    assert change == pytest.approx({1: 1.0, 2: 0.1, 3: 0.9})
    assert per_seed(runs, history, _prediction(versus="b")) == pytest.approx({1: 0.5, 2: -0.3, 3: 0.4})
    both = per_seed(runs, history, _prediction(from_step=0, versus="b"))  # a's change less b's, by seed
    assert both == pytest.approx({1: 0.5, 2: -0.4, 3: 0.4})
    assert per_seed(runs, history, _prediction(metric="absent")) == {}


def test_an_area_is_the_trapezoid_over_the_evaluations_up_to_its_step_by_hand():
    runs, history = _data()
    assert per_seed(runs, history, _prediction(statistic="auc")) == pytest.approx({1: 0.5, 2: 0.15, 3: 0.45})
    diff = per_seed(runs, history, _prediction(statistic="auc", versus="b"))  # b's areas are 0.25 each
    assert diff == pytest.approx({1: 0.25, 2: -0.1, 3: 0.2})
    assert per_seed(runs, history, _prediction(statistic="auc", step=0)) == {}  # one evaluation: no area
    with pytest.raises(ValueError, match="from_step"):
        _prediction(statistic="auc", from_step=0)


def test_an_arm_may_be_a_grid_cells_label():
    runs, history = _data()
    runs = runs.with_columns(pl.col("variant").str.replace("variant=", "train.lam=0.8,variant="))
    cell = _prediction(arm="train.lam=0.8,variant=a", versus="train.lam=0.8,variant=b")
    assert per_seed(runs, history, cell) == pytest.approx({1: 0.5, 2: -0.3, 3: 0.4})
    claim = dict(id="1", text="t", arm="train.lam=0.8,variant=a", metric="m", step=2, comparison=">=",
                 threshold=0.5, transcribed="after the run")
    parse_spec(_spec(space={"train.lam": [0.8, 0.9]}, predictions=[claim]))
    with pytest.raises(SpecError, match=r"predictions\[0\]\.arm.*a grid cell's label, such as "
                                        r"'train.lam=0.8,variant=a'"):
        parse_spec(_spec(space={"train.lam": [0.8, 0.9]}, predictions=[{**claim, "arm": "train.lam=0.7,variant=a"}]))


def test_arms_without_spread_are_decided_by_the_tests_limits():
    # identical arms: every seed's difference is 0, so the tie holds exactly and an order fails
    same = {1: 0.0, 2: 0.0, 3: 0.0}
    tie = decide("s", _prediction(comparison="within", threshold=0.03), same)
    assert tie.status == HELD and tie.p == 0.0
    assert decide("s", _prediction(comparison="within", threshold=0.0), same).status == UNDECIDED  # the edge
    assert decide("s", _prediction(comparison="within", threshold=0.03), {1: 0.05, 2: 0.05}).status == FAILED
    assert decide("s", _prediction(threshold=0.0, p_below=0.05), {1: 0.1, 2: 0.1}).status == HELD
    assert decide("s", _prediction(threshold=0.0, p_below=0.05), same).p == 1.0


def test_decide_counts_seeds_or_reads_the_mean_with_its_test():
    values = {1: 1.0, 2: 0.2, 3: 0.9}
    assert decide("s", _prediction(seeds=2), values).status == HELD  # 2 of 3 at >= 0.5
    assert decide("s", _prediction(seeds=3), values).status == FAILED
    mean = decide("s", _prediction(threshold=0.7), values)  # mean 0.7: meets >= 0.7
    assert mean.status == HELD and mean.met == 2 and math.isclose(mean.mean, 0.7)
    assert math.isclose(mean.se, float(np.std([1.0, 0.2, 0.9], ddof=1) / math.sqrt(3)))
    assert decide("s", _prediction(threshold=0.0, p_below=0.01), values).status == FAILED  # p about 0.08
    assert decide("s", _prediction(comparison="within", threshold=0.25, seeds=1), {1: -0.2, 2: 0.3}).met == 1
    # a tie on the mean is decided by TOST: inside the band is not enough with a wide interval
    wide, tight = {1: -0.5, 2: 0.6, 3: 0.0}, {1: 0.01, 2: -0.01, 3: 0.02}
    assert decide("s", _prediction(comparison="within", threshold=0.2), wide).status == UNDECIDED
    held = decide("s", _prediction(comparison="within", threshold=0.2), tight)
    se = float(np.std([0.01, -0.01, 0.02], ddof=1) / math.sqrt(3))
    from scipy import stats
    by_hand = max(stats.t.sf((0.02 / 3 + 0.2) / se, 2), stats.t.sf((0.2 - 0.02 / 3) / se, 2))
    assert held.status == HELD and math.isclose(held.p, by_hand, rel_tol=1e-9)
    assert decide("s", _prediction(comparison="within", threshold=0.2), {1: 0.5, 2: 0.6}).status == FAILED
    assert decide("s", _prediction(), {}).status == NOT_TESTED
    assert decide("s", _prediction(seeds=1), values, tested=False).status == NOT_TESTED
    pre = Precondition(text="t", arm="a", metric="m", step=0, comparison=">=", threshold=0.02,
                       transcribed="before the run")
    assert decide("s", pre, {1: 0.01, 2: 0.02}).status == MISSED
    assert decide("s", pre, {1: 0.03, 2: 0.02}).status == MET


def _spec(**claims):
    return {"seeds": [1], "variants": [{"name": "a", "set": {"train.lr": 1e-3}}],
            "objective": {"metric": "m", "direction": "maximize"}, **claims}


def test_a_spec_refuses_a_claim_it_cannot_read():
    claim = dict(id="1", text="t", arm="a", metric="m", step=2, comparison=">=", threshold=0.5,
                 transcribed="after the run")
    parse_spec(_spec(predictions=[claim]))
    with pytest.raises(SpecError, match=r"predictions\[0\]\.versus"):
        parse_spec(_spec(predictions=[{**claim, "versus": "nope"}]))
    with pytest.raises(SpecError, match="comparison"):
        parse_spec(_spec(predictions=[{**claim, "comparison": "about"}]))
    with pytest.raises(SpecError, match="seeds"):
        parse_spec(_spec(predictions=[{**claim, "seeds": 1, "p_below": 0.05}]))
    with pytest.raises(SpecError, match="typo"):
        parse_spec(_spec(predictions=[{**claim, "typo": 1}]))


def test_the_committed_claims_read_as_the_issue_found_them():
    verdicts = {(v.spec, v.id): v.status for v in ledger()}
    assert verdicts[("summaries-length", "1a")] == FAILED  # within 1 token on 1 of 8 seeds
    assert verdicts[("summaries-length", "2")] == FAILED
    assert verdicts[("question-cut-summary", "")] == MISSED  # 1.8% cut summaries at step 0, its bar 2%
    assert {s for (spec, i), s in verdicts.items() if spec == "question-cut-summary" and i} == {NOT_TESTED}


def test_the_findings_claims_read_as_issue_51_found_them():
    verdicts = {(v.spec, v.id): v.status for v in ledger()}
    assert verdicts[("finding-normaliser-dose", "1a")] == HELD  # the flip at c = 1: -10.6 points, p 0.002
    assert verdicts[("finding-gae-lambda", "1a")] == FAILED  # predicted faster; -1.43 AUC points, the other sign
    assert verdicts[("finding-gae-mask", "1")] == FAILED and verdicts[("finding-gae-mask", "2")] == HELD
    assert verdicts[("finding-overlong-confirm", "1")] == FAILED  # -1.96 ± 1.34, p 0.16
    assert verdicts[("finding-overlong-dose", "2a")] == FAILED and verdicts[("finding-overlong-dose", "2b")] == HELD
    # peekread-winners-k1 still compacts (up to 2 rows), so its "identical arms" differ on every seed
    assert verdicts[("finding-winners", "2")] == FAILED
    assert verdicts[("finding-winners", "")] == MET  # the baseline shift at step 0, >= 0.2


def test_every_findings_and_questions_spec_with_histories_carries_its_header_claims():
    # issue 51: a committed pre-registered spec whose exports hold histories has its claims in the ledger
    missing = []
    for folder in ("findings", "questions"):
        for path in sorted((ROOT / "sweeps" / folder).glob("*.toml")):
            name, predictions, _ = load_claims(path)
            if (EXPORT_DIR / f"{name}.history.parquet").is_file() and not predictions:
                missing.append(name)
    assert missing == []


def test_a_precondition_missed_leaves_every_prediction_of_its_spec_not_tested():
    path = ROOT / "sweeps" / "questions" / "cut-summary.toml"
    verdicts = evaluate(path)
    assert verdicts[0].kind == "precondition" and verdicts[0].status == MISSED
    assert verdicts[1].values  # read, with numbers, but not decided
    assert "not tested" in ledger_markdown(verdicts)


def test_the_docs_cite_each_claim_as_the_ledger_decides_it():
    verdicts = {(v.spec, v.id or ""): v.status for v in ledger()}
    cited = 0
    for page in DOCS:
        text = " ".join(page.read_text(encoding="utf-8").split())
        for kind, claim, spec, status in STATEMENT.findall(text):
            key = (spec, "" if kind == "precondition" else claim)
            assert key in verdicts, f"{page.name}: cites {kind} {claim} of {spec}, which the ledger lacks"
            assert verdicts[key] == status, f"{page.name}: says {kind} {claim} of {spec} {status}; " \
                                            f"the ledger says {verdicts[key]}"
            cited += 1
    assert cited >= 6


def test_the_ledger_of_one_spec_is_what_simlab_report_prints():
    one = ledger(spec="summaries-length")
    assert one and {v.spec for v in one} == {"summaries-length"}
    assert [v.id for v in one] == [v.id for v in ledger() if v.spec == "summaries-length"]
    assert ledger(spec="quick") == []  # a spec without claims
