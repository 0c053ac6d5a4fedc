"""The report as Markdown: one section per table, each with a legend line for its headers.

Rendering only: the numbers come from :mod:`simlab.analysis.report.build`. An interval and its SE always come
from one estimate (the t interval of the mean +- t SE), so they never contradict each other; where rows
take their SEs from different sources, the ``SE from`` column says which and the legend says why.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import polars as pl

from simlab import names
from simlab.analysis.audit.table import like_for_like_text
from simlab.analysis.report.bases import sweep_bases, sweep_bases_markdown
from simlab.analysis.report.health import Columns
from simlab.analysis.report.runs import EVAL_HEALTH, EVALUATIONS, GROUP_HEALTH, INDEX_HEALTH, SweepRuns
from simlab.analysis.tables import markdown_table
from simlab.analysis.tables import number_text as _num
from simlab.sweep import labels

SE_FROM = {
    "nested": "seeds+instances",
    "crossed": "seeds×instances",
    "rates": "seeds (rates)",
    "rates-bound": "seeds+instance bound",
    "seeds": "seeds",
}
"""How each design's SE is labelled (:data:`simlab.analysis.statistics.levels.Design`)."""
SE_LEGEND = (
    "`SE from`: *seeds+instances*, per-episode outcomes on each seed's own held-out set (the seeds' spread "
    "holds the instance sampling); *seeds×instances*, one held-out set shared by every seed, its instance "
    "term added from the per-episode outcomes; *seeds+instance bound*, a shared set without per-episode "
    "outcomes, its instance term an upper bound; *seeds*, one value per seed."
)


def _pm(mean: float | None, se: float | None, fmt: str = ".1f") -> str:
    """``mean ± se``, the SE at the mean's precision (unsigned)."""
    if mean is None or (isinstance(mean, float) and math.isnan(mean)):
        return "n/a"
    if se is None or math.isnan(se):
        return format(mean, fmt)
    return f"{format(mean, fmt)} ± {format(se, fmt.lstrip('+'))}"


def _interval(low: float | None, high: float | None, fmt: str = ".1f") -> str:
    return "n/a" if low is None or high is None else f"[{format(low, fmt)}, {format(high, fmt)}]"


def _iqm_interval(r: dict[str, Any]) -> str:
    return "" if r.get("iqm_low") is None else " " + _interval(r["iqm_low"], r["iqm_high"])


def _seeds(r: dict[str, Any]) -> str:
    extra = [f"{r[k]} {k}" for k in ("missing", "unfinished") if r.get(k)]
    return str(r["seeds"]) + (f" ({', '.join(extra)})" if extra else "")


def verdict_cell(r: dict[str, Any]) -> str:
    """A difference's verdict with what supports it: sigma, the TOST's p, or the seeds that would decide."""
    if r["verdict"] == "differs":
        return f"differs ({_num(r['sigma'], '+.1f')}σ)"
    if r["verdict"] == "tie":
        return f"tie (TOST p = {r['tost_p']:.3f})"
    if r["verdict"] is None:
        return "n/a"
    need = r["seeds_to_decide"]
    return "undecided" + (f": {need} seeds to decide" if need else ": more seeds do not decide it")


HEADERS = ["Rank", "Variant", "H", "Seeds", "Mean ± SE", "95% CI", "IQM [95% bootstrap]", "Diff ± SE",
           "Diff 95% CI", "SE from", "MDE", "Verdict", "Like-for-like"]


def _row(r: dict[str, Any]) -> list[str]:
    own = [_num(r["rank"], "d"), r["variant"] + (" (baseline)" if r["variant"] == r["baseline"] else ""),
           _num(r["horizon"], "g"), _seeds(r), _pm(r["mean"], r["se"]), _interval(r["ci_low"], r["ci_high"]),
           _num(r["iqm"], ".1f") + _iqm_interval(r)]
    if r["variant"] == r["baseline"]:
        return [*own, "-", "-", SE_FROM.get(r["design"] or "", "n/a"), "-", "baseline", "-"]
    return [*own, _pm(r["difference"], r["se_difference"], "+.1f"),
            _interval(r["diff_ci_low"], r["diff_ci_high"], "+.1f"), SE_FROM.get(r["diff_design"] or "", "n/a"),
            _num(r["mde"], ".1f"), verdict_cell(r), like_for_like_text(r["like_for_like"], r["horizon_ratio"])]


def variant_section(rows: pl.DataFrame, title: str, unit: str) -> str:
    """One evaluation and statistic: its ranked variant rows and the table's legend."""
    ranked = rows.sort("rank", nulls_last=True, maintain_order=True)
    r0 = ranked.row(0, named=True)
    body = markdown_table(HEADERS, [_row(r) for r in ranked.iter_rows(named=True)])
    legend = (f"Mean ± SE and Diff ± SE in {unit}, over seeds and held-out instances; CIs are t intervals of the "
              f"same estimates; MDE at α = {r0['alpha']:g}, {r0['power']:.0%} power; ties by a 90% TOST within "
              f"±{r0['effect']:g}; H = L x (S+1).")
    return f"### {title}\n\n{body}\n{legend}\n"


def ranking_markdown(ranking: pl.DataFrame) -> str:
    """The ranking by paired learning gain, beside final success, with each variant's context."""
    headers = ["Rank by gain", "Variant", "H (tokens it may carry)", "Tokens per episode", "Gain ± SE",
               "Gain 95% CI", "Final ± SE", "Final 95% CI", "Rank by final"]
    rows = [[_num(r["gain_rank"], "d"), r["variant"], _num(r["horizon"], "g"), _num(r["tokens"], ".0f"),
             _pm(r["gain"], r["gain_se"], "+.1f"), _interval(r["gain_low"], r["gain_high"], "+.1f"),
             _pm(r["final"], r["final_se"]), _interval(r["final_low"], r["final_high"]), _num(r["final_rank"], "d")]
            for r in ranking.iter_rows(named=True)]
    return ("### Ranking: paired learning gain, beside final success\n\n" + markdown_table(headers, rows)
            + "\nGain: the last compacted evaluation minus step 0's on the same held-out instances, in points; a "
              "rank is shared where the neighbours are not decided at 2σ. Final success reflects step 0 too (a "
              "better starting point ranks high without learning), so the gain is the ranking statistic. H = "
              "L x (S+1) is the most history a variant may carry (W without compaction); tokens per episode "
              "is what its policy processed at the last evaluation. Differences across very different H or "
              "tokens are not like-for-like.\n")


def to_markdown(sweep: SweepRuns, table: pl.DataFrame, *, speed: pl.DataFrame | None,
                published: pl.DataFrame | None, health: tuple[pl.DataFrame | None, ...],
                ranking: pl.DataFrame | None = None) -> str:
    """The report: the base models before RL, the ranking by learning gain, the variants per evaluation, learning
    speed, what the evaluations saw, the prompt groups and rewards, compaction by index, credit health, the
    published ablations (``health``: the evaluation, group, index and credit tables, in that order)."""
    parts = [_preamble(sweep, table)]
    bases = sweep_bases(sweep.history)
    if bases is not None:
        parts.append(sweep_bases_markdown(bases))
    if ranking is not None:
        parts.append(ranking_markdown(ranking))
    for name, key in EVALUATIONS.items():
        rows = table.filter(pl.col("evaluation") == name)
        if rows.height == 0:  # an evaluation no run played (eval.single_window = false)
            continue
        parts.append(variant_section(rows, f"{name.replace('_', '-')} success (`{key}`, final evaluation)", "points"))
    if speed is not None:
        titles = {"auc": ("learning speed: area under the compacted evaluation curve", "points"),
                  "steps_to": ("learning speed: RL steps to the threshold (compacted)", "steps"),
                  "gain": ("learning gain: the last compacted evaluation minus step 0's, same instances", "points")}
        for statistic, (title, unit) in titles.items():
            rows = speed.filter(pl.col("statistic") == statistic)
            if rows.height:
                parts.append(variant_section(rows, title, unit))
    evaluations, groups, index, credit = health
    groups_markdown, index_markdown = (partial(stage_markdown, title=title) for title in STAGE_SECTIONS)
    for frame, render in ((evaluations, evaluation_markdown), (groups, groups_markdown), (index, index_markdown),
                          (credit, credit_markdown), (published, published_markdown)):
        if frame is not None:
            parts.append(render(frame))
    return "\n".join(parts)


def _preamble(sweep: SweepRuns, table: pl.DataFrame) -> str:
    total = sweep.runs.height
    finished = sweep.runs.filter(pl.col("status") == "FINISHED").height
    r0 = table.row(0, named=True)
    return (
        f"## simlab report: {sweep.experiment}\n\n"
        f"{finished} of {total} trial runs finished; {len(sweep.variants)} variants; baseline `{r0['baseline']}`; "
        f"{sweep.seeds_vary()}. Statistics at α = {r0['alpha']:g} (two-sided), power {r0['power']:.0%}, "
        f"equivalence margin ±{r0['effect']:g} points (`--alpha`, `--power`, `--effect`).\n\n"
        "How to read the tables: a mean's SE covers both levels a claim generalises over, seeds (base model, RL "
        "sampling) and held-out instances, and its 95% CI is the t interval of that same estimate; IQM is the "
        "interquartile mean of the per-seed values. Diff is variant - baseline, paired by seed and held-out "
        "instance where the arms share them. MDE is the difference a two-sided test at α detects with the "
        "stated power, with t quantiles for the seeds at hand. A row is *differs* at 2σ or more, a *tie* only "
        "when a 90% TOST puts it within the margin, else *undecided*, with the seeds that would decide it at "
        "the observed spread. H = L x (S+1) is the effective horizon (W without compaction); a difference "
        "across different H is not like-for-like. " + SE_LEGEND + "\n"
    )


def _health_table(table: pl.DataFrame, columns: Columns, where: str) -> str:
    """A health table as Markdown: variant, where (its column ``where``), then each of ``columns`` as mean ± SE
    (a fraction in percent, where its scale says so)."""
    headers = ["Variant", where.capitalize(), *(label for label, _, _ in columns.values())]
    rows = [
        [r["variant"], r[where].replace("_", "-"),
         *(_scaled(r[f], r[f"{f}_se"], scale, ".1f" if scale > 1 else ".2f") for f, (_, _, scale) in columns.items())]
        for r in table.iter_rows(named=True)
    ]
    return markdown_table(headers, rows)


STAGE_SECTIONS: dict[str, tuple[Columns, str]] = {
    "Prompt groups and rewards": (GROUP_HEALTH, (
        "All-fail, all-success: prompt groups whose G rollouts all scored 0, all 1 (training only: an evaluation "
        "plays one rollout per prompt). No-gradient: groups whose rewards are all equal, whose group-relative "
        "advantages are 0 (with 0/1 rewards, the sum of the two). Reward per rollout counts each rollout once; per "
        "row counts a rollout with K segments K times, as a per-row loss does: above per rollout when the "
        "compacting rollouts score better.")),
    "Compaction by index, in tokens": (INDEX_HEALTH, (
        "Context before, after: the working context when a compaction began and the context the next segment "
        "opened with (prompt, summary, kept tail), means over compactions: the gap is what a compaction removed. "
        "Summary 1, 2, ...: the mean length of a rollout's first, second, ... summary; "
        f"{names.SUMMARY_INDEX_CAP}+ pools the later ones.")),
}
"""The rollout-health sections (:func:`simlab.analysis.report.health.stage_table`): title -> (columns, legend)."""


def stage_markdown(table: pl.DataFrame, title: str) -> str:
    """A rollout-health table (one of :data:`STAGE_SECTIONS`) as a Markdown section with its legend."""
    columns, legend = STAGE_SECTIONS[title]
    return (f"### {title} (training: mean over steps; evaluations: final; ± SE over seeds)\n\n"
            + _health_table(table, columns, "stage") + f"\n{legend}\n")


def evaluation_markdown(table: pl.DataFrame) -> str:
    """The evaluation table as a Markdown section with its explanation."""
    return ("### What the evaluations saw (final evaluation; mean ± SE over seeds)\n\n"
            + _health_table(table, EVAL_HEALTH, "evaluation")
            + "\nOverlong: the episode ended unanswered (out of window, steps or compactions). Segments: "
              "segments per episode K. Holding the answer: summaries that contain the answer token. A policy "
              "that learned behaviour which only fits with compaction shows a single-window overlong rate near "
              "100%.\n")


def _scaled(mean: float | None, se: float | None, scale: float, fmt: str) -> str:
    """``mean ± se`` of a table kept in other units (fractions printed as percent)."""
    if mean is None:
        return "n/a"
    return _pm(mean * scale, None if se is None else se * scale, fmt)


def credit_markdown(credit: pl.DataFrame) -> str:
    """The credit-health table as a Markdown section with its legend."""
    headers = ["Variant", "Seeds", "K SD in group", "corr(K, R) in group", "Longer weight share (%)",
               "Longer token share (%)", "Excess weight (points)", "Baseline shift", "Adv. error (rel. L2)"]
    fields = [("k_sd", 1, ".2f"), ("k_corr", 1, "+.2f"), ("weight_share", 100, ".1f"), ("token_share", 100, ".1f"),
              ("excess", 100, "+.1f"), ("baseline_shift", 1, "+.3f"), ("adv_error", 1, ".3f")]
    rows = [[r["variant"], str(r["seeds"]), *(_scaled(r[f], r[f"{f}_se"], s, fmt) for f, s, fmt in fields)]
            for r in credit.iter_rows(named=True)]
    return (
        "### Credit health over training (mean over steps; ± SE over seeds)\n\n" + markdown_table(headers, rows)
        + "\nK: segments per rollout. *K SD in group* and *corr(K, R) in group*: the SD of K among the G rollouts "
          "of one prompt and its correlation with their rewards (the conditions the trajectory-group and "
          "normaliser findings need). *Longer*: rollouts with K above their group's median; their share of "
          "loss weight against their share of tokens, and the excess. *Baseline shift*: trajectory-group "
          "baseline minus rollout-group baseline. *Adv. error*: GAE estimators against concatenated GAE on "
          "pre-final segments.\n"
    )


PUBLISHED_HEADERS = ["Published ablation", "Published", "Pub. sigma", "Simlab full -> ablated", "Diff", "SE", "Sigma",
                     "Like-for-like", "Direction"]


def published_markdown(published: pl.DataFrame) -> str:
    """The published ablations beside this sweep's matching pairs."""
    rows = [[r["claim"] or r["ablation"], _num(r["published_difference"], "+.1f"), _num(r["published_sigma"], "+.2f"),
             _pair(r["full_variant"], r["ablated_variant"], r["axis"]), _num(r["difference"], "+.1f"),
             _num(r["se"], ".1f"), _num(r["sigma"], "+.2f"),
             "-" if r["difference"] is None else like_for_like_text(r["like_for_like"], r["horizon_ratio"]),
             r["verdict"]] for r in published.iter_rows(named=True)]
    return ("### Against the published ablations (ablated - full, compacted success, points)\n\n"
            + markdown_table(PUBLISHED_HEADERS, rows)
            + "\nSE: the two variants' SEs in quadrature (independent means).\n")


def _pair(full: str | None, ablated: str | None, axis: str) -> str:
    """``axis: full -> ablated (where the rest)``: the pair by what changes, then what is held fixed."""
    if full is None or ablated is None:
        return "-"
    f, a = labels.parse_label(full), labels.parse_label(ablated)
    where = ",".join(f"{k}={v}" for k, v in f.items() if k != axis)
    change = f"{axis}: {f[axis]} -> {a[axis]}"
    return f"{change} ({where})" if where else change
