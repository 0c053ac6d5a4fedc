"""The docs quote the committed exports: each quoted table matches what the exports give today.

A results commit that changes an export, or a rule change that moves a verdict, fails here until the docs
quoting it are regenerated, so that no page goes on stating a number the exports no longer give.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from simlab.analysis.replication import table as fd
from simlab.analysis.replication import text as findings_text

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


def test_the_readme_quotes_finding_2_as_the_exports_give_it(found: fd.Findings) -> None:
    row = next(r for r in found.rows if r["id"] == "2c100")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quoted = f"{row['difference']:.1f} ± {row['se']:.1f}"
    assert f"2c100: {quoted}, Holm p {row['p_holm']:.3f}" in readme, quoted
    assert f"found {quoted} at c = 1" in readme, quoted
