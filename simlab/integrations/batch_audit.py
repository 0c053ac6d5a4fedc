"""``simlab audit-batch``: what a trainer's aggregation does to each rollout of a dumped batch.

From a batch file (:mod:`.batch_file`: row keys, response mask, rewards) it reports

- the implicit weight each rollout gets under each of verl's aggregation modes and simlab's row
  weights: a rollout's total loss weight times R (1 = its fair share of R rollouts), by its row count K,
  with the share of the weight and of the tokens that the multi-row rollouts take;
- success counted by session against by row (verl PR #7580 measured the gap by hand: 6 to 14 points in
  its six runs);
- the effective sample size (Kish, over rollouts) of those weights, under 1/K and without it;
- rows per rollout, and what a learning-rate schedule counted in rollouts but stepped per row does to a
  planned run: it ends K-bar = rows / rollouts times early (ROLL issue 407: a decay to 0 planned over 200
  steps reached 0 at step 123);
- which simlab finding or question applies to this batch, with its number (:data:`ADVICE`).

verl's ``token-sum`` gives every rollout the shares of ``token-mean``, and ``seq-mean-token-sum-norm``
those of ``seq-mean-token-sum``: they differ only by a constant.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from simlab.arrays import FloatArray
from simlab.credit.health import baseline_shift, within_group
from simlab.credit.normalisers import counted_tokens, row_weights
from simlab.errors import RowsError
from simlab.integrations.batch_file import BatchFile
from simlab.integrations.rows import KEY_FORMAT, Rows, read_rows

MODES = ("token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm")
"""verl 0.9's ``loss_agg_mode`` values that simlab's normalisers name."""
WEIGHTS = ("none", "inverse_k", "length_ratio")
"""simlab's per-row weights (``simlab.credit.ROW_WEIGHTS``); ``inverse_k`` is 1/K."""
PR_7580_GAP = "6 to 14 points in the six runs verl PR #7580 measured by hand"


@dataclass(frozen=True)
class Advice:
    """A simlab result that a batch's shape makes relevant."""

    name: str
    where: str
    result: str


ADVICE = {
    "row_weight": Advice(
        "question 1, the row weight under seq-mean-token-mean", "docs/for-trainer-users.md section 1",
        "where the rollouts that split into more rows also fail more, no row weight ended -10.6 +- 2.2 points "
        "below token-mean (final success, 8 seeds); inverse_k (1/K) tied (+0.2 +- 0.6); length_ratio is "
        "token-mean exactly"),
    "baseline": Advice(
        "finding 1, trajectory-group statistics", "docs/findings.md, finding 1",
        "a per-row group estimator (verl's rloo, grpo_vectorized, a row-level grpo) counts a K-row rollout K "
        "times in its own baseline; simlab measured decided ties in learning speed at G = 4, 8 and 32 "
        "(AUC +0.4 +- 0.3 at G = 4); simlab_sync's rollout_group is verl's session path exactly"),
}
"""The results audit-batch points to, by the condition that makes them apply."""


def _per_rollout(rows: Rows, per_row: FloatArray) -> FloatArray:
    batch = rows.batch
    return np.bincount(batch.seg_rollout, weights=per_row, minlength=batch.num_rollouts).astype(np.float64)


def _ess(w: FloatArray) -> float:
    """Kish's effective sample size of weights ``w``: (sum w)^2 / sum w^2."""
    return float(w.sum() ** 2 / (w * w).sum())


def weight_table(rows: Rows) -> list[dict[str, Any]]:
    """One record per (mode, row weight): each rollout's weight x R, by K; shares; ESS."""
    batch = rows.batch
    n = counted_tokens(batch)
    k = batch.segments_per_rollout
    multi = k > 1
    tokens = batch.rollout_tokens / batch.rollout_tokens.sum()
    out = []
    for mode in MODES:
        options: dict[str, Any] = {"max_tokens": int(rows.mask.shape[1])} if mode == "seq-mean-token-sum-norm" else {}
        for weight in WEIGHTS:
            total = _per_rollout(rows, row_weights(batch, mode, row_weight=weight, **options) * n)
            share = total / total.sum()
            out.append({
                "mode": mode, "row_weight": weight,
                "weight_by_k": {int(v): float(share[k == v].mean() * batch.num_rollouts) for v in np.unique(k)},
                "multi_row_weight_share": float(share[multi].sum()),
                "multi_row_token_share": float(tokens[multi].sum()),
                "ess": _ess(total), "rollouts": batch.num_rollouts,
            })
    return out


def success(rows: Rows, above: float) -> dict[str, float]:
    """Success (reward > ``above``) counted once per session and once per row, in percent."""
    batch = rows.batch
    won = batch.rewards > above
    by_row = float(won[batch.seg_rollout].mean() * 100)
    by_session = float(won.mean() * 100)
    return {"by_session": by_session, "by_row": by_row, "gap": by_row - by_session}


def applies(rows: Rows) -> list[dict[str, str]]:
    """The :data:`ADVICE` entries this batch's shape makes relevant, each with why."""
    batch = rows.batch
    spread = within_group(batch)
    shift = float(np.abs(baseline_shift(batch)).max())
    out = []
    if spread["segments_sd"] > 0:
        corr = spread["corr"]
        lean = "fail more" if corr < 0 else "do as well or better"
        why = (f"K varies inside prompt groups (mean in-group SD {spread['segments_sd']:.2f}; corr(K, R) "
               f"{corr:+.2f}: the rollouts with more rows {lean} here)")
        out.append({"why": why, **vars(ADVICE["row_weight"])})
    if shift > 0:
        why = f"the trajectory-group baseline moves by up to {shift:.3f} in a group"
        out.append({"why": why, **vars(ADVICE["baseline"])})
    return out


def schedule(rows: Rows, planned_steps: int) -> dict[str, float]:
    """A schedule planned over ``planned_steps`` steps of this batch's rollouts, its clock advanced per row:
    the step at which it has used its whole plan (``simlab.update``'s ``schedule_unit='rows'``)."""
    per_rollout = rows.num_rows / rows.batch.num_rollouts
    return {"rows_per_rollout": per_rollout, "planned_steps": planned_steps,
            "ends_at_step": math.ceil(planned_steps / per_rollout)}


def audit_batch(data: BatchFile, *, success_above: float = 0.0, planned_steps: int = 200) -> dict[str, Any]:
    """Every number audit-batch reports, as one record."""
    rows = read_rows(data.keys, data.response_mask, data.rewards, finished=data.finished)
    k = rows.batch.segments_per_rollout
    if k.max() < 2:
        raise RowsError.invalid("keys", f"{rows.batch.num_rollouts} one-row sessions",
                                f"audit-batch reads batches whose sessions span several rows ({KEY_FORMAT})")
    return {
        "rows": rows.num_rows, "sessions": rows.batch.num_rollouts, "groups": rows.batch.num_groups,
        "rows_per_session": {int(v): int((k == v).sum()) for v in np.unique(k)},
        "weights": weight_table(rows), "success": success(rows, success_above), "applies": applies(rows),
        "schedule": schedule(rows, planned_steps),
    }


def _by_k(record: dict[str, Any], ks: list[int]) -> str:
    return " | ".join(f"{record['weight_by_k'][v]:.2f}" for v in ks)


def to_markdown(report: dict[str, Any], name: str) -> str:
    """The report as Markdown."""
    ks = sorted(report["rows_per_session"])
    counts = ", ".join(f"K = {v}: {c}" for v, c in report["rows_per_session"].items())
    lines = [f"## simlab audit-batch: {name}", "",
             f"{report['rows']} rows, {report['sessions']} sessions in {report['groups']} prompt groups; "
             f"sessions by rows K: {counts}.", "",
             "Implicit weight per rollout: its total loss weight x R (1 = a fair share of R rollouts), mean by K.", "",
             "| loss_agg_mode | row weight | " + " | ".join(f"K = {v}" for v in ks)
             + " | multi-row weight / token share | ESS (of R) |",
             "|---|---|" + "---|" * len(ks) + "---|---|"]
    for rec in report["weights"]:
        lines.append(f"| {rec['mode']} | {rec['row_weight']} | {_by_k(rec, ks)} | "
                     f"{rec['multi_row_weight_share']:.1%} / {rec['multi_row_token_share']:.1%} | "
                     f"{rec['ess']:.1f} of {rec['rollouts']} |")
    s = report["success"]
    lines += ["", f"Success by session {s['by_session']:.1f}%, by row {s['by_row']:.1f}%: "
              f"a gap of {s['gap']:+.1f} points ({PR_7580_GAP}).", ""]
    ess = {(r["mode"], r["row_weight"]): r["ess"] for r in report["weights"]}
    lines.append("Effective sample size under 1/K (inverse_k): "
                 + ", ".join(f"{m} {ess[(m, 'inverse_k')]:.1f} (none: {ess[(m, 'none')]:.1f})" for m in MODES)
                 + f", of {report['sessions']} sessions.")
    sched = report["schedule"]
    lines += ["", f"Rows per rollout: {sched['rows_per_rollout']:.2f}. A learning-rate schedule planned over "
              f"{sched['planned_steps']} steps in rollouts but stepped per row (ROLL issue 407) reaches its end "
              f"at step {sched['ends_at_step']} (simlab: train.schedule_unit = 'rows'; docs/for-trainer-users.md)."]
    lines += ["", "What applies:"]
    lines += [f"- {a['name']} ({a['where']}): {a['why']}; {a['result']}." for a in report["applies"]] or ["- nothing"]
    return "\n".join(lines)
