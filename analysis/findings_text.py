"""The findings table as text: a compact table that fits a 110-column terminal, and the full Markdown.

``simlab findings`` prints the compact form; ``--markdown`` the full one (docs/findings.md holds it);
``--json`` the records. Rendering only: the numbers come from :mod:`simlab.analysis.findings`.
"""

from __future__ import annotations

import math
import textwrap
from typing import Any

from simlab.analysis.findings import Findings
from simlab.analysis.tables import markdown_table

WIDTH = 110
"""The terminal width the compact table fits."""
SE_FROM = {"nested": "seeds+inst", "crossed": "seeds×inst", "rates": "seeds", "rates-bound": "seeds+bound",
           "seeds": "seeds"}
KIND = {"credit finding": "credit", "serving finding": "serving", "harness check": "check"}
SUPERSEDED = "†"
"""Marks a row in the compact table that a later design superseded."""


def _num(x: float | None, fmt: str) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def diff_text(r: dict[str, Any], prefix: str = "", full: bool = False) -> str:
    """``-0.15 ± 0.24 (-0.6σ)``, with the seeds and the SE's source when ``full``."""
    d = r.get(f"{prefix}difference")
    if d is None:
        return "n/a"
    sigma = r[f"{prefix}sigma"]
    text = f"{d:+.2f} ± {r[f'{prefix}se']:.2f}" + (f" ({sigma:+.1f}σ)" if sigma is not None else "")
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
    if "control is vacuous" in r["reason"]:
        return "undecided (vacuous control)"
    if r["margin"] is None:
        return "undecided (no published delta)"
    main = r["sigma"] is None or abs(r["sigma"]) < 2
    need = r["seeds_to_decide"] if main else r["control_seeds_to_decide"]
    count = f"{need} seeds" if need else "shared held-out set"
    return f"undecided ({'' if main else 'control: '}{count})"


def _mech(r: dict[str, Any]) -> str:
    parts = [f"{m['label']}: {_num(m['treatment'], '.3g')} vs {_num(m['baseline'], '.3g')}" for m in r["mechanism"]]
    return "; ".join(parts) or "-"


def to_compact(found: Findings) -> str:
    """A table of at most :data:`WIDTH` columns, then one wrapped line per row saying what it is."""
    headers = ["#", "Kind", "Pub.", "Treatment - baseline", "Control", "Verdict"]
    rows = [[r["id"] + (SUPERSEDED if r["superseded_by"] else ""), KIND.get(r["kind"], r["kind"]),
             _num(r["published"], "+.1f"), diff_text(r), diff_text(r, "control_"), short_verdict(r)]
            for r in found.rows]
    lines = [markdown_table(headers, rows)]
    for r in found.rows:
        cond = f" [{r['conditional']}]" if r["conditional"] else ""
        later = f" (superseded by {r['superseded_by']})" if r["superseded_by"] else ""
        lines.append(textwrap.fill(f"{r['id']}: {r['finding']}; {r['verdict']}: {r['reason']}{cond}{later}", WIDTH,
                                   subsequent_indent="    "))
    r0 = found.rows[0] if found.rows else {"alpha": 0.05, "power": 0.8}
    lines.append(textwrap.fill(_legend(r0, found), WIDTH))
    return "\n".join(lines)


def _legend(r0: dict[str, Any], found: Findings) -> str:
    where = ", ".join(f"{spec}: {src}" for spec, src in found.sources.items())
    return (f"Differences in points (rates), steps (steps_to) or the metric's unit (slopes), ± their SE over "
            f"seeds and held-out instances; σ = difference / SE. Verdicts at α = {r0['alpha']:g}, power "
            f"{r0['power']:.0%}: reproduced needs 2σ in the published direction and the control a tie decided by "
            f"a 90% TOST within half the published delta; a tie is decided only by that TOST. Kind: credit "
            f"finding, serving finding, or check (holds by how the task is built). {SUPERSEDED}: superseded by a "
            f"later design (the row stays, with its numbers). Full table: "
            f"`simlab findings --markdown`. Runs from: {where}.")


def to_markdown(found: Findings) -> str:
    """The full findings table as Markdown, with the mechanism metrics and what each row is conditional on."""
    headers = ["#", "Kind", "Finding", "Published", "simlab: treatment - baseline", "Control",
               "Mechanism (treatment vs baseline)", "Seeds vary", "Verdict"]
    rows = [[r["id"], r["kind"], r["finding"], _num(r["published"], "+.1f"), diff_text(r, full=True),
             diff_text(r, "control_", full=True), _mech(r),
             r["seeds_vary"] + (f" ({r['conditional']})" if r["conditional"] else ""),
             f"{r['verdict']} ({r['reason']})" + (f"; note: {r['note']}" if r["note"] else "")
             + (f"; superseded by {r['superseded_by']}" if r["superseded_by"] else "")]
            for r in found.rows]
    r0 = found.rows[0] if found.rows else {"alpha": 0.05, "power": 0.8}
    return _legend(r0, found) + "\n\n" + markdown_table(headers, rows)
