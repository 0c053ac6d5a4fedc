"""The findings table as text: a compact table that fits a 110-column terminal, and the full Markdown.

``simlab findings`` prints the compact form; ``--markdown`` the full one (docs/findings.md holds it);
``--json`` the records. Rendering only: the numbers come from :mod:`simlab.analysis.replication.table`.
"""

from __future__ import annotations

import textwrap
from typing import Any

from simlab.analysis.replication.table import Findings
from simlab.analysis.report.bases import bases_lines
from simlab.analysis.tables import markdown_table
from simlab.analysis.tables import number_text as _num

WIDTH = 110
"""The terminal width the compact table fits."""
SE_FROM = {"nested": "seeds+inst", "crossed": "seeds×inst", "rates": "seeds", "rates-bound": "seeds+bound",
           "seeds": "seeds"}
KIND = {"credit finding": "credit", "serving finding": "serving", "harness check": "check"}
SUPERSEDED = "†"
"""Marks a row in the compact table that a later design superseded."""
BY_CONSTRUCTION = "‡"
"""Marks a control by construction in the compact table."""


def diff_text(r: dict[str, Any], prefix: str = "", full: bool = False, sigma: bool = True) -> str:
    """``-0.15 ± 0.24 (-0.6σ)``, with the seeds and the SE's source when ``full``."""
    d = r.get(f"{prefix}difference")
    if d is None:
        return "n/a"
    s = r[f"{prefix}sigma"]
    text = f"{d:+.2f} ± {r[f'{prefix}se']:.2f}" + (f" ({s:+.1f}σ)" if s is not None and sigma else "")
    if full:
        text += f"; n={r[f'{prefix}seeds']}, {SE_FROM.get(r[f'{prefix}se_from'], r[f'{prefix}se_from'])}"
    return text


def short_verdict(r: dict[str, Any]) -> str:
    """The verdict with the one figure that supports it: the TOST's p, or what would decide it."""
    v = str(r["verdict"])
    if v == "tie" and r["tost_p"] is not None:
        return f"tie (TOST p {r['tost_p']:.3f})"
    if v != "undecided":
        return v
    by = r["undecided_by"]
    if by == "vacuous":
        return "undecided (vacuous control)"
    if by == "construction":
        return "undecided (by construction)"
    if by == "adjustment":
        return f"undecided (Holm p {r['p_holm']:.3f})"
    if by == "size":
        return f"undecided (size: {r['seeds_to_decide']} seeds)" if r["seeds_to_decide"] else "undecided (size)"
    if r["margin"] is None:
        return "undecided (no published delta)"
    need = r["control_seeds_to_decide"] if by == "control" else r["seeds_to_decide"]
    count = f"{need} seeds" if need else "shared held-out set"
    return f"undecided ({'control: ' if by == 'control' else ''}{count})"


def _control_text(r: dict[str, Any], full: bool = False) -> str:
    """The control's difference, marked when it is a control by construction (it cannot decide the row)."""
    text = diff_text(r, "control_", full=full, sigma=full)
    if not r["control_by_construction"]:
        return text
    return f"{text} (by construction: {r['control_by_construction']})" if full else text + BY_CONSTRUCTION


def _p_text(r: dict[str, Any]) -> str:
    """``0.009 (0.120)``: the difference's p, and its Holm-adjusted p where its family has other rows."""
    if r["p"] is None:
        return "n/a"
    return f"{r['p']:.3f}" + (f" ({r['p_holm']:.3f})" if r["family_size"] > 1 else "")


def _mech(r: dict[str, Any]) -> str:
    parts = [f"{m['label']}: {_num(m['treatment'], '.3g')} vs {_num(m['baseline'], '.3g')}" for m in r["mechanism"]]
    return "; ".join(parts) or "-"


def to_compact(found: Findings) -> str:
    """A table of at most :data:`WIDTH` columns, then one wrapped line per row saying what it is."""
    headers = ["#", "Kind", "Pub.", "Difference", "p (Holm)", "Control", "Verdict"]
    rows = [[r["id"] + (SUPERSEDED if r["superseded_by"] else ""), KIND.get(r["kind"], r["kind"]),
             _num(r["published"], "+.1f"), diff_text(r, sigma=False), _p_text(r), _control_text(r),
             short_verdict(r)]
            for r in found.rows]
    lines = [markdown_table(headers, rows)]
    for r in found.rows:
        cond = f" [{r['conditional']}]" if r["conditional"] else ""
        lines.append(textwrap.fill(f"{r['id']}: {r['finding']}; {r['verdict']}: {r['reason']}{cond}{_links(r)}",
                                   WIDTH, subsequent_indent="    ",
                                   break_on_hyphens=False))
    lines.append(textwrap.fill(_legend(found), WIDTH, break_on_hyphens=False))
    lines += [textwrap.fill(line, WIDTH, subsequent_indent="    ") for line in bases_lines(found.bases)]
    return "\n".join(lines)


def _links(r: dict[str, Any]) -> str:
    """`` (superseded by 3c2) (re-runs 2c100's runs)``: the rows this one defers to."""
    later = f" (superseded by {r['superseded_by']})" if r["superseded_by"] else ""
    return later + (f" (re-runs {r['reruns']}: not independent evidence)" if r["reruns"] else "")


def _legend(found: Findings) -> str:
    r0 = found.rows[0] if found.rows else {"alpha": 0.05, "power": 0.8}
    where = ", ".join(f"{spec}: {src}" for spec, src in found.sources.items())
    return (f"Differences in points (rates), steps (steps_to) or the metric's unit (slopes), ± their SE over "
            f"seeds and held-out instances; p two-sided, t at the design's degrees of freedom (in brackets, "
            f"Holm-adjusted over the credit and serving rows of one campaign); σ = difference / SE. "
            f"Verdicts at α = {r0['alpha']:g}, power {r0['power']:.0%}: every direction (reproduced, "
            f"opposite) needs Holm p < α over every row pre-registered in its campaign (rows not yet run count "
            f"at p = 1) and a control that is a tie decided by a 90% TOST within the margin (half the published "
            f"delta), never one merely undecided; reproduced: the published direction, the 90% interval wholly "
            f"beyond the margin; a tie: the TOST decides it, or the 90% interval lies inside the margin, in "
            f"either direction (practically 0 at the published scale). A control declared by construction "
            f"counts as one only where its arms are identical in the data. Kind: credit finding, serving "
            f"finding, or check (holds by how the task is built). {SUPERSEDED}: superseded by a later design "
            f"(the row stays, with its numbers). {BY_CONSTRUCTION}: a control by construction (its arms are "
            f"identical on every seed): it never decides a direction. Full table: `simlab findings --markdown`. "
            f"Runs from: {where}.")


def to_markdown(found: Findings) -> str:
    """The full findings table as Markdown, with the mechanism metrics and what each row is conditional on."""
    headers = ["#", "Kind", "Finding", "Published", "simlab: treatment - baseline", "Control",
               "Mechanism (treatment vs baseline)", "Seeds vary", "Verdict"]
    rows = [[r["id"], r["kind"], r["finding"], _num(r["published"], "+.1f"), diff_text(r, full=True),
             _control_text(r, full=True), _mech(r),
             r["seeds_vary"] + (f" ({r['conditional']})" if r["conditional"] else ""),
             f"{r['verdict']} ({r['reason']})" + (f"; note: {r['note']}" if r["note"] else "") + _links(r)]
            for r in found.rows]
    bases = "".join(f"\n{line}\n" for line in bases_lines(found.bases))
    return _legend(found) + "\n\n" + markdown_table(headers, rows) + bases
