"""Question 1 of issue 20, exactly: does splitting a rollout into K rows change its gradient?

Under verl's ``seq-mean-*`` loss aggregation a rollout handed over as K rows weighs about K times as much
(verl PR #7580, uni-agent #185). This script builds the smallest batch that shows it, a GRPO group of two
rollouts of T = 840 optimised tokens each:

    rollout a: advantage +1, split into K rows (K = 1..8) by a length profile
    rollout b: advantage -1, always one row (its unsplit neighbour)

and computes the gradient of simlab's loss, ``clipped_policy_loss(logp, old, A, w)`` with ``w`` from
``simlab.loss_weights(batch, mode, row_weight=...)``, by torch autograd. The policy is tabular: every
token's log-probability is its own parameter and old = current, so the gradient is -w_t A_t token by
token, in float64. The reference is the same batch with rollout a unsplit (one row holding all its
tokens), under the same per-row weight and mode. Per (row weight, mode, profile, K):

    rel_error        ||g_K - g_1|| / ||g_1||                 0: the split changes nothing (exact)
    direction_error  ||g_K / ||g_K|| - g_1 / ||g_1|| ||      0: exact up to a positive scale
    weight_ratio     (|g_K| on a / |g_K| on b) / (the same for g_1): a's weight against its neighbour,
                     relative to unsplit (uni-agent #185's 1:3 is 3)

``seq-mean-token-sum-norm`` divides by a fixed horizon H = 840 (verl's ``loss_scale_factor``), so that
only the row count moves. Run:

    python benchmarks/split_gradient.py [--csv benchmarks/split_gradient.csv] [--docs docs/credit.md | --no-docs]

It writes every row to the CSV and the summary table between the markers in the docs page; the output is
a pure function of the code (no randomness), and tests/credit/test_split_gradient.py asserts both.
"""

from __future__ import annotations

import argparse
import csv
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from simlab import SegmentBatch, loss_weights
from simlab.update import clipped_policy_loss

TOKENS = 840
"""T of each rollout: divisible by 1..8, so every equal split is exact in integers."""
KS = tuple(range(1, 9))
ROW_WEIGHTS = ("none", "inverse_k", "length_ratio")
MODES = ("token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm", "rollout")
"""verl's ``loss_agg_mode`` names (simlab's aliases), and simlab's per-rollout normaliser."""
PROFILES = {
    "equal": lambda k: [1.0] * k,
    "front": lambda k: [float(max(k - 1, 1))] + [1.0] * (k - 1),
    "short_last": lambda k: [1.0] * (k - 1) + [0.05] if k > 1 else [1.0],
    "halving": lambda k: [0.5**i for i in range(k)],
}
"""Relative segment lengths: equal; the first segment half the rollout; a short final segment (the answer
after the last compaction); each segment half the one before."""
COLUMNS = ("row_weight", "mode", "profile", "k", "rel_error", "direction_error", "weight_ratio")
EXACT = 1e-12
"""A relative error below this is float64 rounding: the combination reproduces the unsplit gradient."""
START, END = "<!-- split-gradient:start -->", "<!-- split-gradient:end -->"


def split(total: int, shares: list[float]) -> list[int]:
    """Integer lengths in proportion to ``shares``, each >= 1, summing to ``total`` (largest remainder)."""
    raw = np.asarray(shares) / np.sum(shares) * total
    out = np.maximum(np.floor(raw).astype(int), 1)
    for i in np.argsort(-(raw - np.floor(raw)))[: total - int(out.sum())]:
        out[i] += 1
    return out.tolist()


def gradient(rows_a: list[int], row_weight: str, mode: str) -> np.ndarray:
    """(2T,) d loss / d log pi of every token, rollout a's in generation order, then rollout b's."""
    batch = SegmentBatch.from_rollouts([rows_a, [TOKENS]], [1.0, 0.0], groups=[0, 0])
    options = {"max_tokens": TOKENS} if mode == "seq-mean-token-sum-norm" else {}
    w = torch.from_numpy(loss_weights(batch, mode, row_weight=row_weight, **options))
    adv = torch.from_numpy(batch.broadcast(np.where(batch.seg_rollout == 0, 1.0, -1.0)))
    logp = torch.zeros(batch.shape, dtype=torch.float64, requires_grad=True)
    loss, _ = clipped_policy_loss(logp, logp.detach(), adv, w)
    loss.backward()
    assert logp.grad is not None
    return logp.grad.numpy()[batch.token_mask]  # row-major: a's rows in order, then b's


@dataclass(frozen=True)
class Row:
    row_weight: str
    mode: str
    profile: str
    k: int
    rel_error: float
    direction_error: float
    weight_ratio: float


def compare(g: np.ndarray, ref: np.ndarray) -> tuple[float, float, float]:
    """(rel_error, direction_error, weight_ratio) of a split gradient ``g`` against the unsplit ``ref``."""
    rel = float(np.linalg.norm(g - ref) / np.linalg.norm(ref))
    direction = float(np.linalg.norm(g / np.linalg.norm(g) - ref / np.linalg.norm(ref)))

    def a_over_b(x: np.ndarray) -> float:
        return float(np.abs(x[:TOKENS]).sum() / np.abs(x[TOKENS:]).sum())

    return rel, direction, a_over_b(g) / a_over_b(ref)


def table() -> list[Row]:
    """Every (row weight, mode, profile, K)."""
    out = []
    for row_weight in ROW_WEIGHTS:
        for mode in MODES:
            ref = gradient([TOKENS], row_weight, mode)
            for profile, shares in PROFILES.items():
                for k in KS:
                    g = gradient(split(TOKENS, shares(k)), row_weight, mode)
                    out.append(Row(row_weight, mode, profile, k, *compare(g, ref)))
    return out


def to_csv(rows: list[Row]) -> str:
    """The rows as CSV text, floats to 12 significant digits."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    for r in rows:
        writer.writerow([r.row_weight, r.mode, r.profile, r.k, *(f"{x:.12g}" for x in
                                                                  (r.rel_error, r.direction_error, r.weight_ratio))])
    return buf.getvalue()


def from_csv(text: str) -> list[Row]:
    """The rows :func:`to_csv` wrote."""
    out = []
    for rec in csv.DictReader(io.StringIO(text)):
        out.append(Row(rec["row_weight"], rec["mode"], rec["profile"], int(rec["k"]), float(rec["rel_error"]),
                       float(rec["direction_error"]), float(rec["weight_ratio"])))
    return out


def verdict(rows: list[Row]) -> str:
    """``exact``, ``exact up to scale`` or ``no``, over every profile and K of one combination."""
    if all(r.rel_error < EXACT for r in rows):
        return "**exact**"
    if all(r.direction_error < EXACT for r in rows):
        return "up to scale"
    return "no"


def _f(x: float) -> str:
    return "0" if abs(x) < EXACT else f"{x:.3f}"


def markdown(rows: list[Row]) -> str:
    """The docs' summary table: per combination, the verdict, then rel_error and weight_ratio at K = 2, 4, 8
    (equal rows), and the largest rel_error and direction_error over every profile at K = 8."""
    head = ("| row weight | mode | verdict | rel. error K=2 / 4 / 8 (equal) | weight ratio K=2 / 4 / 8 (equal) "
            "| max rel. error K=8 | max direction error K=8 |\n|---|---|---|---|---|---|---|\n")
    lines = []
    for row_weight in ROW_WEIGHTS:
        for mode in MODES:
            mine = [r for r in rows if r.row_weight == row_weight and r.mode == mode]
            equal = {r.k: r for r in mine if r.profile == "equal"}
            at8 = [r for r in mine if r.k == 8]
            lines.append(
                f"| `{row_weight}` | `{mode}` | {verdict(mine)} "
                f"| {' / '.join(_f(equal[k].rel_error) for k in (2, 4, 8))} "
                f"| {' / '.join(f'{equal[k].weight_ratio:.3f}' for k in (2, 4, 8))} "
                f"| {_f(max(r.rel_error for r in at8))} | {_f(max(r.direction_error for r in at8))} |"
            )
    return head + "\n".join(lines) + "\n"


def write_docs(page: Path, text: str) -> None:
    """Replace what lies between the markers in ``page`` with ``text``."""
    doc = page.read_text()
    start, end = doc.index(START) + len(START), doc.index(END)
    page.write_text(doc[:start] + "\n" + text + doc[end:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--csv", type=Path, default=Path(__file__).with_suffix(".csv"))
    parser.add_argument("--docs", type=Path, default=Path(__file__).parents[1] / "docs" / "credit.md")
    parser.add_argument("--no-docs", action="store_true", help="leave the docs page as it is")
    args = parser.parse_args()
    rows = table()
    args.csv.write_text(to_csv(rows))
    if not args.no_docs:
        write_docs(args.docs, markdown(rows))
    print(markdown(rows))


if __name__ == "__main__":
    main()
