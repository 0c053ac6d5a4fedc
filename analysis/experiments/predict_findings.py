"""The credit campaign's predictions: the route model's expected gradient per finding, dose and arm.

Run before any run of the dose-response specs (sweeps/findings/*-dose.toml); its table is what their
headers and docs/findings.md quote. The model (simlab.analysis.replication.predict) is one decision, the route at the
first step, with each route's rollout kinds as calibrated on the two-route PeekRead families: the base
model reads about half the time, a reader without a burst succeeds about 90% of the time, a peeker about
35% (the fact shows in a quarter of the peeks), a burst reader compacts into three segments with the
decision in a 3-token first one. g_READ > 0 moves the policy toward READ; its sign under the treatment
against the baseline's says where each ends, the ratio of magnitudes how much faster one learns.

    python -m simlab.analysis.experiments.predict_findings   # prints the table, writes analysis/predictions.csv
"""

from __future__ import annotations

import argparse
from pathlib import Path

import polars as pl

from simlab.analysis.replication.predict import Choice, Kind, RouteModel, expected_gradient

READER, PEEKER = 0.90, 0.35
"""Success of a reader without a burst and of a peeker (the base models of the routes family)."""
BURST = (3, 3, 6)
"""Optimised tokens per segment of a burst reader (the decision opens the 3-token first segment)."""
PLAIN = (8,)
"""Optimised tokens of a one-segment rollout."""
POLICIES = (0.5, 0.9)
"""READ shares the gradient is read at: the base model's, and a policy well on its way."""
OUT = Path(__file__).resolve().parents[1] / "analysis" / "predictions.csv"


def routes(c: float, burst_prob: float = 0.5, overlong: float = 0.0) -> RouteModel:
    """The two-route family at coupling c (c < 0: a read without a burst loses the fact with |c|); a burst
    reader ends overlong with probability ``overlong`` (it ran out of compactions)."""
    burst_win = READER * (1 - max(c, 0.0))
    plain_win = READER * (1 - max(-c, 0.0))
    return RouteModel({
        "READ": (Kind(burst_prob, BURST, burst_win, overlong), Kind(1 - burst_prob, PLAIN, plain_win)),
        "PEEK": (Kind(1.0, PLAIN, PEEKER),),
    })


def routes_win(k: int, c: float, burst_prob: float = 0.5, peeker: float = 0.125) -> RouteModel:
    """Winners compact more (issue 29's finding 1 design, the peekread-winners presets): a burst reader
    compacts into K segments and keeps the fact; a read without a burst loses it with probability -c
    (c < 0), and a peek never shows it (chance 1/8), so K goes with success."""
    burst = (3,) * (k - 1) + (6,)
    return RouteModel({
        "READ": (Kind(burst_prob, burst, READER), Kind(1 - burst_prob, PLAIN, READER * (1 + min(c, 0.0)))),
        "PEEK": (Kind(1.0, PLAIN, peeker),),
    })


def long_k(k: int) -> RouteModel:
    """Every read bursts into K segments; a peek never shows the fact (chance 1/8)."""
    segments = (3,) * (k - 1) + (10,)
    return RouteModel({"READ": (Kind(1.0, segments, 0.95),), "PEEK": (Kind(1.0, (10,), 0.125),)})


def _rows(finding: str, dose: float, model: RouteModel, arms: dict[str, Choice], **kw: int) -> list[dict[str, object]]:
    out = []
    for pi in POLICIES:
        row: dict[str, object] = {"finding": finding, "dose": dose, "read_share": pi,
                                  "read_success": model.mean_success("READ"),
                                  "peek_success": model.mean_success("PEEK")}
        for arm, choice in arms.items():
            row[arm] = 1e3 * expected_gradient(model, choice, {"READ": pi, "PEEK": 1 - pi}, batches=80, **kw)["READ"]
        out.append(row)
    return out


def table() -> pl.DataFrame:
    """g_READ x 1000 per finding, dose, READ share and arm (treatment and baseline)."""
    rows: list[dict[str, object]] = []
    normalisers = {"treatment": Choice(normaliser="segment"), "baseline": Choice(normaliser="token")}
    for c in (-0.05, 0.25, 0.5, 1.0):
        rows += _rows("2 segment vs token normaliser (coupling c)", c, routes(c), normalisers)
    groups = {"treatment": Choice(estimator="trajectory_group"), "baseline": Choice(estimator="rollout_group")}
    for g in (4, 8, 32):
        rows += _rows("1 trajectory vs rollout group (G at c = 0.5)", g, routes(0.5), groups, group_size=g,
                      prompts=256 // g)
    rows += _rows("1 trajectory vs rollout group (control: c = -0.05, G = 32)", 32, routes(-0.05), groups,
                  group_size=32, prompts=8)
    gae = {"treatment": Choice(estimator="gae_segment_local", options={"lam": 0.95}),
           "baseline": Choice(estimator="gae_compaction", options={"lam": 0.95})}
    for k in (1, 2, 4, 8):
        rows += _rows("3 segment-local GAE vs corrected (K)", k, long_k(k), gae, group_size=1, prompts=256)
    rows += _issue29()
    masks = {"treatment": Choice(overlong_mask=False), "baseline": Choice(overlong_mask=True)}
    for rate, p in ((0.0, 0.3), (0.1, 0.1), (0.3, 0.3)):
        rows += _rows("4 no overlong mask (overlong rate of readers)", rate, routes(-0.05, p, 1.0 if rate else 0.0),
                      masks)
    for weight in ("inverse_k", "length_ratio"):  # issue 20's question 1, against the token normaliser
        for c in (-0.05, 1.0):
            rows += _rows(f"Q1 seq-mean-token-mean with row weight {weight} vs token-mean (coupling c)", c, routes(c),
                          {"treatment": Choice(normaliser="segment", row_weight=weight),
                           "baseline": Choice(normaliser="token")})
    for rate, p in ((0.0, 0.3), (0.3, 0.3)):  # issue 20's question 3b: overlong rollouts out of the baseline
        rows += _rows("Q3 baseline over finished rollouts vs all (overlong rate of readers)", rate,
                      routes(-0.05, p, 1.0 if rate else 0.0),
                      {"treatment": Choice(options={"baseline": "finished"}), "baseline": Choice()})
    for k in (1, 8):  # issue 20's question 6: a cost per segment, summed over the rollout
        for coef in (0.05, 0.1, 0.2):
            rows += _rows(f"Q6 cost per segment x coef vs none (K = {k})", coef, long_k(k),
                          {"treatment": Choice(cost="segments", cost_coef=coef), "baseline": Choice()})
    return pl.DataFrame(rows).with_columns(
        (pl.col("treatment") / pl.col("baseline")).alias("ratio"),
        (pl.col("treatment").sign() != pl.col("baseline").sign()).alias("flip"))


LAMBDAS: dict[str, dict[str, object]] = {"0.95": {"lam": 0.95}, "0.9": {"lam": 0.9}, "0.8": {"lam": 0.8},
           "response_cap l=4": {"lam": "response_cap", "alpha": 1.5, "response_cap": 4}}
"""Finding 3's lambda axis (issue 29): fixed lambdas and CompactionRL's length-adaptive reading with l the
per-response cap, l = 4 tokens so that N_after / l is about the seed's (its first segment keeps 5%)."""


def _gae(lam: dict[str, object]) -> dict[str, Choice]:
    return {"treatment": Choice(estimator="gae_segment_local", options=dict(lam)),
            "baseline": Choice(estimator="gae_compaction", options=dict(lam))}


def _issue29() -> list[dict[str, object]]:
    """Issue 29's designs, predicted before their runs: finding 3 along lambda on the long-K family and by
    direction on the two-route family, and finding 1 where winners compact more."""
    rows: list[dict[str, object]] = []
    for label, lam in LAMBDAS.items():
        for k in (1, 8):
            rows += _rows(f"3 segment-local GAE vs corrected, K = {k}, lambda {label}", k, long_k(k), _gae(lam),
                          group_size=1, prompts=256)
    for fixed in (0.95, 0.8):
        for c in (-0.05, 0.5, 1.0):
            rows += _rows(f"3 segment-local GAE vs corrected on two routes, lambda {fixed} (coupling c)", c,
                          routes(c), _gae({"lam": fixed}), group_size=1, prompts=256)
    groups = {"treatment": Choice(estimator="trajectory_group"), "baseline": Choice(estimator="rollout_group")}
    for k, c in ((8, -1.0), (1, -1.0)):
        for g in (4, 8):
            rows += _rows(f"1 trajectory vs rollout group, winners compact (K = {k}, c = {c}) (G)", g,
                          routes_win(k, c), groups, group_size=g, prompts=256 // g)
    return rows


def main() -> None:
    """Print the route model's predictions and write them to --out; see the module's docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    t = table()
    with pl.Config(tbl_rows=100, tbl_cols=20, tbl_width_chars=160, float_precision=3):
        print(t)
    t.write_csv(args.out, float_precision=4)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
