"""The docs quote the committed exports: each quoted table matches what the exports give today.

A results commit that changes an export, or a rule change that moves a verdict, fails here until the docs
quoting it are regenerated, so that no page goes on stating a number the exports no longer give.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from simlab.analysis.replication import table as fd
from simlab.analysis.replication import text as findings_text
from simlab.analysis.replication.data import SpecData, read_export
from simlab.analysis.statistics import outcomes, power
from simlab.analysis.statistics.compare import Arm, difference, estimate
from simlab.analysis.statistics.outcomes import Statistic

ROOT = Path(__file__).resolve().parents[2]


def _table(lines: list[str]) -> list[str]:
    """The first Markdown table in ``lines`` (its header, rule and rows)."""
    start = next(i for i, line in enumerate(lines) if line.startswith("| #"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return lines[start:end]


@pytest.fixture(scope="module")
def found() -> fd.Findings:
    return fd.gather(fd.load_rows(), source="exports")


def test_the_findings_page_quotes_the_table_the_exports_give(found: fd.Findings) -> None:
    page = (ROOT / "docs" / "findings.md").read_text(encoding="utf-8").splitlines()
    at = page.index("## The table: `simlab findings`")
    assert _table(page[at:]) == _table(findings_text.to_compact(found).splitlines()), (
        "docs/findings.md's table differs from `simlab findings --source exports`: paste the new table")


def test_the_readme_and_the_results_quote_finding_2_as_the_exports_give_it(found: fd.Findings) -> None:
    row = next(r for r in found.rows if r["id"] == "2c100")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    results = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    quoted = f"{row['difference']:.1f} ± {row['se']:.1f}"
    assert f"2c100: {quoted}, Holm p {row['p_holm']:.3f}" in results, quoted
    assert f"found {quoted} at c = 1" in results, quoted
    assert f"measured it {quoted.lstrip('-')} points below" in " ".join(readme.split()), quoted


def _summary_table():
    """The summaries table module (analysis, not a benchmark)."""
    from simlab.analysis.experiments import summary_table

    return summary_table


@pytest.mark.parametrize(("experiment", "metric", "quoted"), [
    ("summaries-compaction-credit", "eval/compacted/segments_mean",
     {"rollout": "3.5 -> 2.9 -> 3.2", "rows-as-samples": "3.5 -> 2.7 -> 2.7", "trajectory": "3.5 -> 3.0 -> 2.8"}),
    ("summaries-duo-credit", "eval/compacted/summary_holds_answer",
     {"train": "72.3 -> 62.3", "mask": "72.3 -> 54.4", "separate-w4": "72.3 -> 61.6"}),
])
def test_the_summaries_page_quotes_its_experiments_as_the_exports_give_them(experiment: str, metric: str,
                                                                          quoted: dict[str, str]) -> None:
    table = _summary_table()
    data = table.spec_data(experiment, False)
    page = (ROOT / "docs" / "summaries.md").read_text(encoding="utf-8")
    scale = 100.0 if "holds" in metric else 1.0
    final, early = table.first_and_last(data, metric), table.first_and_last(data, metric, 20)
    for arm, text in quoted.items():
        means = [scale * f.filter(f["variant"] == f"variant={arm}")[col].mean()
                 for f, col in ((final, "first"), (early, "last"), (final, "last"))]
        got = " -> ".join(f"{m:.1f}" for m in (means if text.count("->") == 2 else [means[0], means[2]]))
        assert got == text and text in page, (arm, got, text)


def _main_job_arm(data: SpecData, variant: str, statistic: Statistic) -> Arm:
    """One arm of the main job (docs/results.md) from its exports: per-episode compacted success, by seed."""
    runs = data.runs.filter(pl.col("variant") == variant).select("run_id", "seed")
    assert data.episodes is not None, "the main job's export has no per-episode outcomes"
    got = outcomes.episode_outcomes(data.episodes, "compacted", statistic)
    assert got is not None
    got = got.join(runs, on="run_id").select("seed", "instance", "value")
    seeds = {int(s): float(v) for s, v in got.group_by("seed").agg(pl.col("value").mean()).iter_rows()}
    return Arm(seeds, got)


def _main_job_row(data: SpecData, variant: str, label: str) -> str:
    """The main-job table's row of one arm (docs/results.md), as the exports give it."""
    cells = [label]
    for statistic in ("final", "auc"):
        est = estimate(_main_job_arm(data, variant, statistic))
        assert est is not None
        cells.append(f"{est.mean:.1f} ± {est.se:.1f}")
    runs = data.runs.filter(pl.col("variant") == variant)
    share = [100 * runs[f"mean:health/longer/{kind}_share"].mean() for kind in ("loss", "token")]  # type: ignore[operator]
    cells += [f"{runs['final:eval/compacted/segments_mean'].mean():.2f}", f"{share[0]:.1f}% / {share[1]:.1f}%"]
    return "| " + " | ".join(cells) + " |"


def test_the_results_main_job_table_is_what_its_exports_give() -> None:
    """docs/results.md's table of the main job (`simlab sweep quick`, exported as analysis/findings/quick.*): each
    arm's compacted success and AUC with their SE over seeds and instances, segments per episode, the longer
    rollouts' shares, and the paired differences with sigma, p and MDE."""
    data = read_export("quick")
    assert data is not None, "analysis/findings/quick.* is missing"
    readme = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")
    rows = [_main_job_row(data, "train.normaliser=token", "token normaliser (SUPO's, the baseline)"),
            _main_job_row(data, "train.normaliser=segment", "segment normaliser (CompactionRL's ablation)")]
    diffs = []
    for statistic in ("final", "auc"):
        d = difference(_main_job_arm(data, "train.normaliser=segment", statistic),
                       _main_job_arm(data, "train.normaliser=token", statistic))
        assert d is not None
        diffs.append((d.mean, d.se, d.df))
    (m, se, df), (m2, se2, _) = diffs
    p, mde = power.two_sided_p(m, se, df), power.min_detectable_effect(se, df)
    rows.append(f"| difference | {m:.1f} ± {se:.1f} ({abs(m) / se:.1f} σ, p {p:.2f} at df {df:.0f}; MDE {mde:.1f} "
                f"at 80% power) | {m2:.1f} ± {se2:.1f} ({abs(m2) / se2:.1f} σ) | | |")
    for row in rows:
        assert row in readme, f"docs/results.md's main-job table lacks this row (the exports give it):\n{row}"


def test_the_summaries_page_quotes_the_base_campaign_as_its_exports_give_it() -> None:
    from simlab.analysis.report.bases import campaign_markdown

    folder = ROOT / "analysis" / "findings" / "bases"
    table = campaign_markdown(folder).strip()
    assert table.count("\n") >= 2, "the campaign's exports are missing"
    assert table in (ROOT / "docs" / "summaries.md").read_text(encoding="utf-8")


def test_the_summaries_page_quotes_the_lookup_probe_as_its_exports_give_it() -> None:
    import polars as pl

    from simlab.analysis.report.lookup import lookup_markdown

    runs = pl.read_csv(ROOT / "analysis" / "findings" / "lookup" / "lookup-runs.csv")
    table = lookup_markdown(runs, 0.9).strip()
    assert table in (ROOT / "docs" / "summaries.md").read_text(encoding="utf-8")
