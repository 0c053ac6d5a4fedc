"""The lookup probe's tables (:mod:`simlab.train.lookup`): one row per probe, and per setting across seeds.

A setting has learnt the lookup when every seed's probe reached the target share of summaries that keep the
cued fact; the per-setting table gives the mean with its SE and the range over seeds, and the attention from
the summary's key token onto the cued fact's value beside the attention onto the other facts' values.
"""

from __future__ import annotations

import polars as pl

from simlab.analysis.tables import markdown_table, number_text

SETTING = ["lr", "d_model", "n_layer"]
"""The columns that name a probe's setting (its seed aside)."""


def setting_table(runs: pl.DataFrame) -> pl.DataFrame:
    """One row per setting: seeds, seeds that learnt, steps to learn, keep (mean, SE, min, max) and attention
    (per layer, the cued value's and the other values' weight, means over seeds)."""
    layers = sorted(c for c in runs.columns if c.startswith("attn_l"))
    others = sorted(c for c in runs.columns if c.startswith("attn_other_l"))
    return (
        runs.group_by(SETTING)
        .agg(
            pl.len().alias("seeds"),
            pl.col("learnt").sum().alias("learnt"),
            pl.col("steps").filter(pl.col("learnt")).max().alias("steps_to_learn_max"),
            pl.col("steps").max().alias("steps_max"),
            pl.col("keep").mean().alias("keep"),
            (pl.col("keep").std() / pl.len().sqrt()).alias("keep_se"),
            pl.col("keep").min().alias("keep_min"),
            pl.col("keep").max().alias("keep_max"),
            pl.col("value").mean().alias("value"),
            *[pl.col(c).mean() for c in layers + others],
        )
        .sort(SETTING)
    )


def lookup_markdown(runs: pl.DataFrame, target: float) -> str:
    """The per-setting table in Markdown, with a line saying which settings learnt the lookup on every seed."""
    table = setting_table(runs)
    layers = sorted(c for c in table.columns if c.startswith("attn_l"))
    rows = []
    for r in table.iter_rows(named=True):
        attn = " / ".join(f"{100 * r[c]:.0f}:{100 * r[c.replace('attn_l', 'attn_other_l')]:.0f}" for c in layers)
        rows.append([number_text(r["lr"], "g"), str(r["d_model"]), str(r["n_layer"]), f"{r['learnt']} of {r['seeds']}",
                     "-" if r["steps_to_learn_max"] is None else str(r["steps_to_learn_max"]), str(r["steps_max"]),
                     f"{100 * r['keep']:.1f} ± {100 * (r['keep_se'] or 0.0):.1f}",
                     f"{100 * r['keep_min']:.1f}-{100 * r['keep_max']:.1f}", f"{100 * r['value']:.1f}", attn])
    head = ["lr", "width", "layers", "learnt", "steps to learn (most)", "steps run (most)", "keep % (mean ± SE)",
            "keep % (seed range)", "greedy value right %", "attention % cued:other, per layer"]
    full = table.filter(pl.col("learnt") == pl.col("seeds"))
    verdict = (f"Learnt on every seed (keep ≥ {100 * target:.0f}%): "
               + ("; ".join(f"lr {number_text(r['lr'], 'g')}, width {r['d_model']}, {r['n_layer']} layers"
                            for r in full.iter_rows(named=True)) or "no setting") + ".")
    return markdown_table(head, rows).rstrip("\n") + "\n\n" + verdict + "\n"
