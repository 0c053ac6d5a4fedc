"""Base quality per seed: the base model's held-out success beside its teacher's and its floor's.

Every run logs its base's measurement at step 0 (:mod:`simlab.train.quality`, under ``base/heldout*``); this
module turns one run per seed into a row, the rows into a table, and the table into Markdown with the two
flags a reader needs before any RL result: a base that is not clearly above its floor (its summaries are
worth nothing the reward pays for, so a result about summary content is vacuous), and a base far from its
teacher (cloning did not take). ``simlab base``, ``simlab report`` and ``simlab findings`` show it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from simlab import names
from simlab.analysis.tables import markdown_table, number_text

TEACHER_NEAR = 10.0
"""A base within this many points of its teacher's held-out success counts as near its teacher."""
FLOOR_TARGET = 20.0
"""Issue 50's bar for a base whose summaries pay: at least this many points above its floor."""
SCHEMA = {
    "seed": pl.Int64, "base_steps": pl.Int64, "base": pl.Float64, "teacher": pl.Float64, "floor": pl.Float64,
    "gain": pl.Float64, "gain_se": pl.Float64, "above_floor": pl.Boolean, "teacher_lead": pl.Float64,
    "base_holds_answer": pl.Float64, "teacher_holds_answer": pl.Float64, "base_holds_cued": pl.Float64,
    "teacher_holds_cued": pl.Float64,
}
"""One row per seed, rates in [0, 1]: the base's, teacher's and floor's success, the gain over the floor with
its SE over instances, whether the base is clearly above it, and what their summaries hold."""


def _get(metrics: Mapping[str, Any], key: str) -> float | None:
    value = metrics.get(key)
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def base_row(seed: int, metrics: Mapping[str, Any], base_steps: int | None = None) -> dict[str, Any] | None:
    """A seed's row from its step-0 metrics, or None where the run did not measure its base."""
    if _get(metrics, names.BASE_GAIN) is None:
        return None
    at = {who: (lambda name, p=prefix: _get(metrics, names.metric(p, name)))
          for who, prefix in names.BASE_HELDOUT_PREFIXES.items()}
    return {
        "seed": seed, "base_steps": base_steps, "base": at["base"](names.SUCCESS),
        "teacher": at["teacher"](names.SUCCESS), "floor": at["floor"](names.SUCCESS),
        "gain": _get(metrics, names.BASE_GAIN), "gain_se": _get(metrics, names.BASE_GAIN_SE),
        "above_floor": bool(_get(metrics, names.BASE_ABOVE_FLOOR)),
        "teacher_lead": _get(metrics, names.BASE_TEACHER_LEAD),
        "base_holds_answer": at["base"](names.SUMMARY_HOLDS_ANSWER),
        "teacher_holds_answer": at["teacher"](names.SUMMARY_HOLDS_ANSWER),
        "base_holds_cued": at["base"](names.SUMMARY_HOLDS_CUED),
        "teacher_holds_cued": at["teacher"](names.SUMMARY_HOLDS_CUED),
    }


def checks_table(curves: Mapping[int, Sequence[Mapping[str, float]]]) -> pl.DataFrame:
    """Each seed's cloning checks as rows (seed, steps, and the check metrics of :data:`simlab.names.BASE_CHECK`):
    where a seed's base left its plateau, and whether it stopped at the gate."""
    schema = {"seed": pl.Int64, "steps": pl.Int64, **{name: pl.Float64 for name in names.BASE_CHECK}}
    rows = [{"seed": seed, **{k: check.get(k) for k in schema if k != "seed"}}
            for seed, curve in curves.items() for check in curve]
    return pl.DataFrame(rows, schema=schema).sort("seed", "steps")


def checks_markdown(checks: pl.DataFrame) -> str:
    """The cloning checks in points, one row per seed and check."""
    rows = [[str(r["seed"]), str(r["steps"]), _pts(r[names.BASE_CHECK_SUCCESS]),
             _pts(r[names.BASE_CHECK_FLOOR_SUCCESS]),
             f"{_pts(r[names.BASE_CHECK_GAIN])} ± {_pts(r[names.BASE_CHECK_GAIN_SE])}"]
            for r in checks.iter_rows(named=True)]
    legend = ("Cloning checks (`base.check_every`) on each seed's check set, apart from its held-out set: success "
              "(%) of the base and of its floor, and the gain ± its SE over instances.")
    return f"{legend}\n\n{markdown_table(['seed', 'cloning steps', 'base', 'floor', 'gain ± SE'], rows)}"


def base_table(rows: Sequence[Mapping[str, Any]]) -> pl.DataFrame:
    """The rows as a frame, by seed."""
    return pl.DataFrame(list(rows), schema=SCHEMA).sort("seed")


def near_teacher(lead: float | None) -> bool:
    """Whether a base whose teacher leads it by ``lead`` (a rate difference) is within :data:`TEACHER_NEAR`."""
    return lead is not None and 100 * lead <= TEACHER_NEAR


def _pts(x: float | None) -> str:
    return number_text(None if x is None else 100 * x, ".1f")


def flags(row: Mapping[str, Any]) -> str:
    """What a reader must know about a seed's base before its RL results: ``at floor``, ``far from teacher``."""
    out = [] if row["above_floor"] else ["at floor"]
    if row["teacher_lead"] is not None and not near_teacher(row["teacher_lead"]):
        out.append("far from teacher")
    return ", ".join(out) or "ok"


def base_markdown(table: pl.DataFrame) -> str:
    """The per-seed table in points, its flags, and a one-line tally under it."""
    cued = table["base_holds_cued"].drop_nulls().len() > 0
    headers = ["seed", "cloning steps", "base", "teacher", "floor", "gain ± SE", "holds answer base / teacher"]
    headers += ["holds cued base / teacher"] if cued else []
    rows = []
    for r in table.iter_rows(named=True):
        row = [str(r["seed"]), number_text(r["base_steps"], "d"), _pts(r["base"]), _pts(r["teacher"]), _pts(r["floor"]),
               f"{_pts(r['gain'])} ± {_pts(r['gain_se'])}",
               f"{_pts(r['base_holds_answer'])} / {_pts(r['teacher_holds_answer'])}"]
        row += [f"{_pts(r['base_holds_cued'])} / {_pts(r['teacher_holds_cued'])}"] if cued else []
        rows.append([*row, flags(r)])
    legend = ("Held-out success (%) of each seed's base model (its own summaries), its teacher on the same "
              "instances, and its floor (the base with summaries emptied); gain = base - floor, paired by "
              "instance, ± its SE over instances. `at floor`: gain not above 2 SE; `far from teacher`: more than "
              f"{TEACHER_NEAR:g} points below it.")
    return f"{legend}\n\n{markdown_table([*headers, 'flag'], rows)}\n{tally(table)}\n"


def tally(table: pl.DataFrame) -> str:
    """``6 of 8 bases clearly above their floor; 3 of 8 within 10 points of their teacher.``"""
    n = table.height
    above = int(table["above_floor"].sum())
    near = sum(map(near_teacher, table["teacher_lead"]))
    return (f"{above} of {n} bases clearly above their floor; {near} of {n} within {TEACHER_NEAR:g} points of "
            "their teacher.")


def sweep_bases(history: pl.DataFrame | None) -> pl.DataFrame | None:
    """Each seed's base row from a sweep's metric histories (step 0), with its variant; one row per seed
    where every variant of the seed measured the same base (arms that differ only in RL), else one per variant
    and seed. None where no run measured its base (runs logged before the measurement existed)."""
    if history is None:
        return None
    keys = [k for k in history.get_column("key").unique().to_list() if k.startswith(names.BASE_HELDOUT)]
    if names.BASE_GAIN not in keys:
        return None
    rows = []
    at0 = history.filter(pl.col("key").is_in(keys) & (pl.col("step") == 0))
    for (variant, seed), part in at0.group_by(["variant", "seed"], maintain_order=True):
        row = base_row(int(seed), dict(zip(part["key"], part["value"], strict=True)))
        if row is not None:
            rows.append({"variant": variant, **row})
    table = pl.DataFrame(rows, schema={"variant": pl.String, **SCHEMA}).sort("seed", "variant")
    shared = table.drop("variant").unique().height == table.select("seed").unique().height
    return table.drop("variant").unique(maintain_order=True) if shared else table


def sweep_bases_markdown(table: pl.DataFrame) -> str:
    """The report's section: the base models before RL, per seed (and variant, where the bases differ)."""
    heading = "### Base models before RL (step 0, held-out set)\n\n"
    if "variant" not in table.columns:
        return heading + "Every variant of a seed starts from the same base.\n\n" + base_markdown(table)
    parts = [heading]
    for (variant,), part in table.group_by(["variant"], maintain_order=True):
        parts.append(f"Variant `{variant}`:\n\n{base_markdown(part.drop('variant'))}")
    return "\n".join(parts)


def bases_of(runs: pl.DataFrame, history: pl.DataFrame | None) -> pl.DataFrame | None:
    """:func:`sweep_bases` of a findings sweep: its histories (run_id, key, step, value) labelled with each run's
    variant and seed from its per-run table."""
    if history is None:
        return None
    return sweep_bases(history.join(runs.select("run_id", "variant", "seed"), on="run_id"))


def flagged_seeds(table: pl.DataFrame) -> list[int]:
    """The seeds whose base is not clearly above its floor (in any variant)."""
    return sorted({int(s) for s in table.filter(~pl.col("above_floor")).get_column("seed").to_list()})


def bases_lines(tables: Mapping[str, pl.DataFrame]) -> list[str]:
    """One line per sweep that measured its bases: ``spec: 6 of 8 bases clearly above their floor ...;
    at floor: seeds 21, 24``. (``simlab findings``; the per-seed tables are ``simlab report``'s.)"""
    lines = []
    for spec, table in tables.items():
        at_floor = flagged_seeds(table)
        flag = f"; at floor: seeds {', '.join(map(str, at_floor))}" if at_floor else ""
        lines.append(f"bases of {spec}: {tally(table).removesuffix('.')}{flag}")
    return lines


def campaign_rows(folder: Path) -> list[dict[str, Any]]:
    """One summary row per base-quality export under ``folder`` (``<config>.csv``, as ``simlab base --out``
    writes its table), by family (the name less ``-before`` / ``-after``), its ``-before`` first: seeds, mean
    success of base, teacher and floor, the median gain, and the seeds that meet each of the three bars (clearly
    above the floor, within :data:`TEACHER_NEAR` of the teacher, at least :data:`FLOOR_TARGET` points above it)."""
    rows = []
    for path in sorted(folder.glob("*.csv"), key=_family_order):
        t = pl.read_csv(path, schema=SCHEMA)
        lead, gain = t.get_column("teacher_lead"), t.get_column("gain")
        stats = t.select(pl.col("base_steps").min().alias("fewest_steps"), pl.col("base_steps").max().alias("steps"),
                         pl.col("base", "teacher", "floor").mean(),
                         pl.col("gain").median().alias("gain_median")).row(0, named=True)
        rows.append({
            "config": path.stem, "seeds": t.height, **stats,
            "above_floor": int(t.get_column("above_floor").sum()),
            "near_teacher": sum(map(near_teacher, lead)),
            "floor_target": int((100 * gain >= FLOOR_TARGET).sum()),
        })
    return rows


def _family_order(path: Path) -> tuple[str, bool]:
    stem = path.stem
    return stem.removesuffix("-before").removesuffix("-after"), not stem.endswith("-before")


def _steps_text(fewest: int, most: int) -> str:
    """``1500``, or ``3000-8000`` where the seeds' cloning stopped at different steps (a gate)."""
    return str(most) if fewest == most else f"{fewest}-{most}"


def campaign_markdown(folder: Path) -> str:
    """The docs' table of a base-quality campaign (:func:`campaign_rows`), in points."""
    headers = ["config", "seeds", "cloning steps", "base", "teacher", "floor", "median gain",
               "clearly above floor", f"within {TEACHER_NEAR:g} of teacher", f">= {FLOOR_TARGET:g} over floor"]
    rows = [[f"`{r['config']}`", str(r["seeds"]), _steps_text(r["fewest_steps"], r["steps"]), _pts(r["base"]),
             _pts(r["teacher"]),
             _pts(r["floor"]), _pts(r["gain_median"]),
             *(f"{r[k]} of {r['seeds']}" for k in ("above_floor", "near_teacher", "floor_target"))]
            for r in campaign_rows(folder)]
    return markdown_table(headers, rows)
