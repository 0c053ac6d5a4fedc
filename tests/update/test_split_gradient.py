"""Issue 20, question 1: the gradient of a rollout split into K rows against the same rollout unsplit.

``benchmarks/split_gradient.py`` computes the whole table (every per-row weight, mode, length profile
and K = 1..8) and writes it to ``benchmarks/split_gradient.csv`` and docs/credit.md. These tests
recompute a part of it, assert the exact combinations by hand and over every row, and check that the
CSV and the docs page say what the code computes now (rerun the script when they do not).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import split_gradient as sg  # noqa: E402

CSV = ROOT / "benchmarks" / "split_gradient.csv"
EXACT = {("none", "token-mean"), ("none", "rollout"), ("length_ratio", "seq-mean-token-mean")}
UP_TO_SCALE = {("none", "seq-mean-token-sum"), ("none", "seq-mean-token-sum-norm")}


@pytest.fixture(scope="module")
def committed() -> list[sg.Row]:
    return sg.from_csv(CSV.read_text())


def test_the_committed_table_is_complete(committed):
    keys = {(r.row_weight, r.mode, r.profile, r.k) for r in committed}
    assert len(committed) == len(keys) == len(sg.ROW_WEIGHTS) * len(sg.MODES) * len(sg.PROFILES) * len(sg.KS)


@pytest.mark.parametrize("row_weight", sg.ROW_WEIGHTS)
@pytest.mark.parametrize("mode", sg.MODES)
def test_exact_combinations(committed, row_weight, mode):
    rows = [r for r in committed if (r.row_weight, r.mode) == (row_weight, mode)]
    exact = all(r.rel_error < sg.EXACT for r in rows)
    scaled = all(r.direction_error < sg.EXACT for r in rows)
    assert exact == ((row_weight, mode) in EXACT)
    assert scaled == ((row_weight, mode) in EXACT | UP_TO_SCALE)
    assert all(r.rel_error < sg.EXACT for r in rows if r.k == 1)  # K = 1 is the unsplit batch itself


@pytest.mark.parametrize(("row_weight", "mode", "k"), [
    ("none", "token-mean", 3), ("none", "seq-mean-token-mean", 2), ("none", "seq-mean-token-mean", 8),
    ("inverse_k", "seq-mean-token-mean", 4), ("length_ratio", "seq-mean-token-mean", 5),
    ("none", "seq-mean-token-sum", 4), ("none", "seq-mean-token-sum-norm", 7), ("length_ratio", "token-mean", 2),
])
@pytest.mark.parametrize("profile", ["equal", "halving"])
def test_recomputed_rows_match_the_table(committed, row_weight, mode, k, profile):
    ref = sg.gradient([sg.TOKENS], row_weight, mode)
    g = sg.gradient(sg.split(sg.TOKENS, sg.PROFILES[profile](k)), row_weight, mode)
    row = next(r for r in committed if (r.row_weight, r.mode, r.profile, r.k) == (row_weight, mode, profile, k))
    np.testing.assert_allclose(sg.compare(g, ref), (row.rel_error, row.direction_error, row.weight_ratio),
                               rtol=1e-9, atol=1e-13)


def test_the_k_fold_weight_by_hand(committed):
    # equal rows under seq-mean-token-mean: the split rollout weighs K times its neighbour (uni-agent #185);
    # 1/K gives it back one row's weight; the row count N_seg = K + 1 still scales the gradient by 2/(K+1)
    for k in sg.KS:
        plain = next(r for r in committed if (r.row_weight, r.mode, r.profile, r.k) ==
                     ("none", "seq-mean-token-mean", "equal", k))
        fixed = next(r for r in committed if (r.row_weight, r.mode, r.profile, r.k) ==
                     ("inverse_k", "seq-mean-token-mean", "equal", k))
        summed = next(r for r in committed if (r.row_weight, r.mode, r.profile, r.k) ==
                      ("none", "seq-mean-token-sum", "equal", k))
        assert plain.weight_ratio == pytest.approx(k)
        assert fixed.weight_ratio == pytest.approx(1.0)
        assert fixed.rel_error == pytest.approx(1 - 2 / (k + 1)) == summed.rel_error


def test_lengths_split_exactly():
    for profile in sg.PROFILES.values():
        for k in sg.KS:
            lengths = sg.split(sg.TOKENS, profile(k))
            assert len(lengths) == k and sum(lengths) == sg.TOKENS and min(lengths) >= 1


def test_the_docs_show_the_table(committed):
    doc = (ROOT / "docs" / "credit.md").read_text()
    block = doc[doc.index(sg.START) + len(sg.START): doc.index(sg.END)]
    assert block.strip() == sg.markdown(committed).strip()
