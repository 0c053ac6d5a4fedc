"""simlab audit: every Block 3 figure recomputed from the data file, the loader's errors, the command."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from simlab.analysis.audit import table as audit_mod
from simlab.analysis.audit.data import default_data_path, load_published
from simlab.analysis.audit.table import ablation_table, audit, to_markdown
from simlab.cli import app
from simlab.errors import AuditDataError


@pytest.fixture(scope="module")
def table() -> pl.DataFrame:
    return audit()


def row(table: pl.DataFrame, claim_id: str) -> dict:
    rows = table.filter(pl.col("id") == claim_id).to_dicts()
    assert len(rows) == 1, claim_id
    return rows[0]


def r1(x: float) -> float:
    return round(x, 1)


# --------------------------------------------------------------------------------- Block 3: SUPO
def test_supo_codegym(table: pl.DataFrame) -> None:
    r = row(table, "supo.codegym")
    assert (r1(r["difference"]), r1(r["se"]), round(r["sigma"], 2)) == (3.2, 6.2, 0.51)
    assert r["like_for_like"] is True and r["horizon_ratio"] == 1.0
    assert r["verdict"] == "within noise (<1 sigma)"


def test_supo_browsecomp_plus(table: pl.DataFrame) -> None:
    r = row(table, "supo.bcp")
    assert (r1(r["difference"]), r1(r["se"]), round(r["sigma"], 2)) == (14.0, 7.0, 2.01)
    assert r["like_for_like"] is False and r["horizon_ratio"] == 3.0
    assert r["verdict"].startswith("significant but not like-for-like (3x")


# -------------------------------------------------------------------------------- Block 3: ReSum
def test_resum_training_free_reproduces(table: pl.DataFrame) -> None:
    r = row(table, "resum.training_free")
    assert r1(r["difference"]) == 4.5 and r["published"] == 4.5
    assert r["verdict"].startswith("reproduces")


def test_resum_grpo_readings_match_no_baseline(table: pl.DataFrame) -> None:
    ids = ["resum.grpo_vs_resum", "resum.grpo_vs_grpo_react", "resum.grpo_vs_react"]
    assert [round(row(table, i)["difference"], 2) for i in ids] == [4.40, 6.74, 8.90]
    for i in ids:
        r = row(table, i)
        assert r["published"] == 8.2 and abs(r["difference"] - 8.2) > 0.6
        assert r["verdict"] == "abstract's further gain 8.2 matches no baseline"
        assert r["se"] is None and r["like_for_like"] is None


@pytest.mark.parametrize(
    ("claim_id", "diff", "winner"),
    [
        ("resum.lead.3b_gaia", -0.6, "GRPO on ReSum rollouts"),  # 37.9 vs 38.5
        ("resum.lead.30b_browsecomp.pass1", -1.2, "MEM1-GRPO"),  # 18.3 vs 19.5
        ("resum.lead.30b_browsecomp.pass3", -3.2, "MEM1-GRPO"),  # 26.5 vs 29.7
    ],
)
def test_resum_grpo_does_not_lead(table: pl.DataFrame, claim_id: str, diff: float, winner: str) -> None:
    r = row(table, claim_id)
    assert r1(r["difference"]) == diff
    assert r["verdict"] == f"does not lead: {winner} is ahead"


def test_resum_lead_cells_come_from_the_grid() -> None:
    data = load_published()
    assert data.score("resum.resum_grpo[WebSailor-3B/GAIA]").value == 37.9
    assert data.score("resum.resum_grpo[WebSailor-30B/BrowseComp]").value == 18.3


# ------------------------------------------------------------------------- Block 3: CompactionRL
@pytest.mark.parametrize(
    ("claim_id", "diff", "se", "sigma"),
    [
        ("compactionrl.swe.vs_base", 7.0, 3.4, 2.06),
        ("compactionrl.tb.vs_base", 3.1, 4.5, 0.70),
    ],
)
def test_compactionrl_headline(
    table: pl.DataFrame, claim_id: str, diff: float, se: float, sigma: float
) -> None:
    r = row(table, claim_id)
    assert (r1(r["difference"]), r1(r["se"]), round(r["sigma"], 2)) == (diff, se, sigma)
    assert r["like_for_like"] is True


def test_compactionrl_verdicts(table: pl.DataFrame) -> None:
    assert row(table, "compactionrl.swe.vs_base")["verdict"] == "significant (>=2 sigma)"
    assert row(table, "compactionrl.tb.vs_base")["verdict"] == "within noise (<1 sigma)"


def test_compactionrl_against_rl_at_twice_the_context(table: pl.DataFrame) -> None:
    assert r1(row(table, "compactionrl.swe.vs_rl_2x")["difference"]) == 2.3
    assert r1(row(table, "compactionrl.tb.vs_rl_2x")["difference"]) == 0.9


def test_summariser_swap_against_rl_campaign(table: pl.DataFrame) -> None:
    swap, campaign = row(table, "compactionrl.summariser_swap"), row(table, "compactionrl.rl_campaign")
    assert (r1(swap["difference"]), r1(campaign["difference"])) == (5.0, 5.5)
    over = row(table, "compactionrl.rl_over_swap")
    assert r1(over["difference"]) == 0.5 and abs(over["sigma"]) < 1


# -------------------------------------------------------------------------- Block 3: AutoCompact
def test_autocompact_trigger_rates(table: pl.DataFrame) -> None:
    r = row(table, "autocompact.trigger")
    assert r["compared"] == "44.3 -> 58.5"
    assert round(r["difference"], 1) == 14.2 and r["se"] is None
    assert r["verdict"].startswith("no SE")


# ------------------------------------------------------------------------------- ablations
@pytest.mark.parametrize(
    ("ablation_id", "compared", "diff"),
    [
        ("supo.ablation.trajectory_group.bcp", "53.0 -> 49.0", -4.0),
        ("supo.ablation.overlong_mask.bcp", "53.0 -> 44.0", -9.0),
        ("supo.ablation.trajectory_group.codegym", "44.5 -> 42.1", -2.4),
        ("compactionrl.ablation.token_level_loss", "66.8 -> 60.0", -6.8),
        ("compactionrl.ablation.gae_correction", "66.8 -> 63.0", -3.8),
    ],
)
def test_published_ablations(table: pl.DataFrame, ablation_id: str, compared: str, diff: float) -> None:
    r = row(table, ablation_id)
    assert r["section"] == "ablation" and r["compared"] == compared and r1(r["difference"]) == diff
    assert r["sigma"] < 0


def test_ablation_table_for_against_published(table: pl.DataFrame) -> None:
    ab = ablation_table()
    assert ab["id"].to_list() == table.filter(pl.col("section") == "ablation")["id"].to_list()
    r = ab.filter(pl.col("id") == "supo.ablation.overlong_mask.bcp").to_dicts()[0]
    assert (r["axis"], r["full_setting"], r["ablated_setting"]) == ("train.overlong_mask", "true", "false")
    assert r1(r["difference"]) == -9.0 and r1(r["se"]) == 7.0


def test_ablations_name_simlab_settings() -> None:
    """By key path, as a sweep's variant labels spell them (what ``--against-published`` pairs on)."""
    from simlab.config import flatten, resolve

    axes = {a.id: (a.axis, a.full_setting, a.ablated_setting) for a in load_published().ablations}
    assert axes["compactionrl.ablation.gae_correction"] == (
        "train.estimator",
        "gae_compaction",
        "gae_segment_local",
    )
    assert axes["compactionrl.ablation.token_level_loss"] == ("train.normaliser", "token", "segment")
    assert {axis for axis, _, _ in axes.values()} <= set(flatten(resolve()))


# -------------------------------------------------------------------------------- rendering
def test_markdown_prints_block3_at_its_precision(table: pl.DataFrame) -> None:
    md = to_markdown(table)
    for text in [
        "| +3.2 ",
        "| 6.2 ",
        "| +0.51 ",
        "| +14.0 ",
        "| 7.0 ",
        "| +2.01 ",
        "no (3x)",
        "| +4.50 ",
        "| +4.40 ",
        "| +6.74 ",
        "| +8.90 ",
        "| +7.0 ",
        "| 3.4 ",
        "| +2.06 ",
        "| +3.1 ",
        "| 4.5 ",
        "| +0.70 ",
        "| +2.3 ",
        "| +0.9 ",
        "| +5.0 ",
        "| +5.5 ",
        "44.3 -> 58.5",
    ]:
        assert text in md, text
    assert md.count("### ") == 2
    for section in md.split("### ")[1:]:  # columns padded: every line of one table is as wide
        assert len({len(line) for line in section.splitlines() if line.startswith("|")}) == 1


def test_readme_shows_the_table_as_printed(table: pl.DataFrame) -> None:
    # the audit section moved from the README to docs/report-and-audit.md (b0335f8)
    page = Path(__file__).resolve().parents[2] / "docs" / "report-and-audit.md"
    assert to_markdown(table) in page.read_text(encoding="utf-8")


def test_packaged_data_has_sources() -> None:
    assert default_data_path().is_file()
    data = load_published()
    assert all("arxiv" in meta or "url" in meta for meta in data.papers.values())
    for score in data.scores.values():
        assert score.paper in data.papers and score.table


# ------------------------------------------------------------------------------- bad data
def _variant(tmp_path: Path, old: str, new: str) -> Path:
    text = default_data_path().read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "published.toml"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("value = 44.5", "value = 120.0", r"scores\[0\]\.value=120\.0"),
        ("value = 44.5", 'value = "44.5"', r"scores\[0\]\.value"),
        ('paper = "supo"', 'paper = "nope"', "choose one of"),
        ('baseline = "supo.codegym.grpo"', 'baseline = "supo.codegym.typo"', "names no score"),
        ('id = "supo.codegym.supo"', 'id = "supo.codegym.grpo"', "repeated"),
        ('CodeGym"\nkind = "difference"', 'CodeGym"\nkind = "ratio"', r"claims\[0\]\.kind='ratio'"),
        ("eval_size = 128", "eval_size = 0", "eval_size=0"),
        ("schema = 1", "schema = 2", "schema=2"),
        ('id = "resum.react"', 'id = "resum.react"\nextra_key = 1', None),
    ],
)
def test_bad_data_names_the_field(tmp_path: Path, old: str, new: str, message: str | None) -> None:
    path = _variant(tmp_path, old, new)
    if message is None:  # unknown extra keys are tolerated
        load_published(path)
        return
    with pytest.raises(AuditDataError, match=message):
        load_published(path)


def test_unreadable_data(tmp_path: Path) -> None:
    with pytest.raises(AuditDataError, match="it does not exist"):
        load_published(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("scores = [", encoding="utf-8")
    with pytest.raises(AuditDataError, match="not valid TOML"):
        load_published(bad)


# ---------------------------------------------------------------------------------- the command
runner = CliRunner()


def test_cli_prints_the_table() -> None:
    result = runner.invoke(app, ["audit"])
    assert result.exit_code == 0, result.output
    assert "| SUPO vs GRPO, CodeGym" in result.output and "+0.51" in result.output


def test_cli_json() -> None:
    result = runner.invoke(app, ["audit", "--json"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)
    assert {r["id"] for r in records} >= {"supo.codegym", "autocompact.trigger"}


def test_cli_out_writes_three_files(tmp_path: Path) -> None:
    result = runner.invoke(app, ["audit", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["audit.csv", "audit.md", "audit.parquet"]
    back = pl.read_parquet(tmp_path / "audit.parquet")
    assert back.equals(audit())
    assert (tmp_path / "audit.md").read_text(encoding="utf-8") == to_markdown(back)


@pytest.mark.parametrize("make_bad", [lambda p: p / "missing", lambda p: _touch(p / "a_file")])
def test_cli_bad_out_exits_2(tmp_path: Path, make_bad) -> None:
    bad = make_bad(tmp_path)
    result = runner.invoke(app, ["audit", "--out", str(bad)])
    assert result.exit_code == 2
    assert re.search(r"error: `--out=.*` is invalid", result.output)


def _touch(path: Path) -> Path:
    path.write_text("", encoding="utf-8")
    return path


def test_cli_unwritable_out_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("simlab.analysis.tables._writable", lambda path: False)  # root ignores chmod
    result = runner.invoke(app, ["audit", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "not writable" in result.output
    assert list(tmp_path.iterdir()) == []


def test_cli_corrupt_data_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[[scores]\n", encoding="utf-8")
    out = tmp_path / "out"
    out.mkdir()
    result = runner.invoke(app, ["audit", "--data", str(bad), "--out", str(out)])
    assert result.exit_code == 2 and "not valid TOML" in result.output
    assert list(out.iterdir()) == []
    missing = runner.invoke(app, ["audit", "--data", str(tmp_path / "nope.toml")])
    assert missing.exit_code == 2 and "`--data=" in missing.output and "it does not exist" in missing.output


def test_cli_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: pl.DataFrame, *args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", broken)
    result = runner.invoke(app, ["audit", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "disk full" in result.output
    assert list(tmp_path.iterdir()) == []


def test_audit_module_has_no_printed_constants() -> None:
    # Every figure comes from the data file: the module source holds none of Block 3's numbers.
    source = Path(audit_mod.__file__).read_text(encoding="utf-8")
    for figure in ["44.5", "47.7", "6.2", "0.51", "8.2", "66.8", "59.8", "44.3", "58.5"]:
        assert figure not in source, figure


def test_audit_runs_from_any_folder(tmp_path):
    """The published data is found through the package, not the working folder (a checkout's cwd hid it)."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "simlab.cli", "audit", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list(tmp_path.iterdir()) == []
