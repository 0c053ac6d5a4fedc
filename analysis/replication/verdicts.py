"""A finding's verdict: its judged difference and its control's, read against the published sign.

The verdicts and the order they are read in are :func:`verdict`'s docstring; the alpha and power are a
:class:`Levels`, the Holm family a row is adjusted in a :class:`Family`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from simlab.analysis.replication.spec import FindingRow
from simlab.analysis.statistics import power
from simlab.analysis.statistics.compare import Judgement

Verdict = Literal["reproduced", "opposite", "holds", "fails", "differs", "tie", "undecided",
                  "control moved", "not run"]
"""``holds`` and ``fails`` are a harness check's ``reproduced`` and ``opposite``: a check is never counted as a
reproduced finding."""



@dataclass(frozen=True)
class Levels:
    """The alpha and power every row is judged at."""

    alpha: float = power.ALPHA
    power: float = power.POWER


@dataclass(frozen=True)
class Family:
    """Where a row's p-value stands in its Holm family."""

    p: float
    """The Holm-adjusted p of the row's difference."""
    size: int
    """The rows in the family: every credit and serving row pre-registered in its campaign (those not yet
    run count at p = 1)."""
    name: str

    def text(self) -> str:
        """``Holm p 0.120 over 15 rows of credit-dose`` (empty for a family of one)."""
        return "" if self.size <= 1 else f"Holm p {self.p:.3f} over {self.size} rows of {self.name}"


@dataclass(frozen=True)
class Decision:
    """A row's verdict, its reason, and for an undecided row what is missing (``by``) and the seeds that
    would supply it."""

    verdict: Verdict
    reason: str
    by: Literal["", "main", "control", "vacuous", "construction", "adjustment", "size"] = ""
    """``main``: the difference is neither significant nor a decided tie; ``control``: the control is not
    settled; ``vacuous``: the control cannot show the mechanism absent; ``construction``: the control is a
    control by construction; ``adjustment``: significant alone, not after its family's Holm adjustment;
    ``size``: the published sign, its interval across the margin."""
    seeds: int | None = None
    """Seeds that would decide an undecided row (``main``, ``size``; ``control``: the control's tie)."""


def verdict(row: FindingRow, main: Judgement | None, control: Judgement | None,
            family: Family | None = None) -> Decision:
    """The row's verdict, read in this order.

    *tie*: not significant (p >= alpha, t at the design's df) and the TOST decides it within the margin, or
    its 90% interval inside the margin and no direction at Holm-adjusted p < alpha (a lean that does not
    survive its family). *control moved*: the control differs (p < alpha). Every verdict that claims a
    direction needs Holm-adjusted p < alpha and a settled control that is not a *control by construction*
    (one identical to its treatment however the runs go, :func:`by_construction`). A significant difference
    whose 90% interval lies inside the margin is a *tie* with a lean, in either direction; *reproduced*: the
    published direction, the 90% interval wholly beyond the margin (a check reads *holds*); *opposite*: the
    other direction. *undecided* otherwise, saying what would decide it.
    """
    if main is None:
        return Decision("not run", "fewer than 2 seeds in an arm")
    if not main.significant:
        if main.decided_tie:
            assert main.tost is not None
            return Decision("tie", f"TOST p = {main.tost.p:.3f} within ±{main.margin:g}")
        return Decision("undecided", _to_decide(main, "a tie"), "main", main.seeds_to_decide())
    if _control_moved(row, control):
        assert control is not None
        return Decision("control moved", f"control {control.estimate.mean:+.1f} at {control.sigma:+.1f} sigma")
    strength = _strength(main, family)
    adjusted = family is None or family.p < main.alpha
    if row.sign is not None and main.negligible:
        return _lean(main, strength)
    if row.sign is None:
        if not adjusted:
            return Decision("undecided", f"{strength}: not significant after adjustment", "adjustment")
        return Decision("differs", f"{strength}; no published sign to compare")
    if row.control_vacuous:
        return Decision("undecided", f"{strength}, but the control is vacuous: {row.control_vacuous}", "vacuous")
    if row.kind != "harness check" and (why := by_construction(row, control)):
        return Decision("undecided", f"{strength}, but its control is a control by construction ({why}): it "
                        "cannot show the mechanism absent", "construction")
    if not _control_settled(row, control):
        return Decision("undecided", f"{strength}, but the control is " + (
            "not measured" if control is None else _to_decide(control, "its tie")), "control",
            None if control is None else control.seeds_to_decide())
    if row.kind == "harness check":
        return Decision("holds" if _same(row, main) else "fails", strength)
    return _effect_verdict(row, main, adjusted, strength)


def _effect_verdict(row: FindingRow, main: Judgement, adjusted: bool, strength: str) -> Decision:
    """A significant difference with a settled control: its size against the margin, its direction, and
    whether it survives its family's Holm adjustment."""
    assert row.sign is not None
    if not adjusted:
        return Decision("undecided", f"{strength}: not significant after adjustment", "adjustment")
    if not _same(row, main):
        return Decision("opposite", strength)
    if main.margin is None:
        return Decision("reproduced", f"{strength}; no published size to compare")
    if main.exceeds_margin(row.sign):
        return Decision("reproduced", strength)
    low, high = main.interval(1 - 2 * main.alpha)
    excess = abs(main.estimate.mean) - main.margin
    need = power.seeds_for_effect(main.estimate.seed_sd, excess, fixed_var=main.estimate.fixed_var,
                                  alpha=main.alpha, power=main.power) if excess > 0 else None
    return Decision("undecided", f"{strength} in the published direction, but its 90% interval [{low:+.2f}, "
                    f"{high:+.2f}] reaches inside ±{main.margin:g}: " + (
                        f"{need} seeds would tell its size" if need else "its size is not above the margin"),
                    "size", need)


def _inside(main: Judgement) -> str:
    assert main.tost is not None
    return f"its 90% interval [{main.tost.low:+.2f}, {main.tost.high:+.2f}] lies inside ±{main.margin:g}"


def _lean(main: Judgement, strength: str) -> Decision:
    """A tie by its interval: significant, but its 90% interval inside the margin, in either direction (a
    negligible difference claims no direction, the published one included)."""
    assert main.tost is not None
    return Decision("tie", f"{_inside(main)} (TOST p = {main.tost.p:.3f}); a lean at {strength}")


def by_construction(row: FindingRow, control: Judgement | None) -> str:
    """Why the row's control is identical to its treatment by construction ('' if it is not): its arms
    measured identical on every seed (difference 0, SE 0), for the reason the row declares
    (``control_by_construction``) where it declares one. A declared control whose arms differ in the data is
    no control by construction: it is judged as any control (a decided tie, or it moved). A declared one not
    yet measured keeps its declaration."""
    identical = control is not None and control.estimate.se == 0 and control.estimate.mean == 0
    if identical:
        return row.control_by_construction or "its arms are identical on every seed"
    return row.control_by_construction if control is None else ""


def _same(row: FindingRow, main: Judgement) -> bool:
    return row.sign is not None and math.copysign(1.0, main.estimate.mean) == row.sign


def _strength(main: Judgement, family: Family | None) -> str:
    """``3.6 sigma, p 0.009 (Holm p 0.120 over 15 rows of credit-dose)``."""
    if not math.isfinite(main.sigma):
        return "the same in every seed, SE 0"
    holm = family.text() if family is not None else ""
    return f"{abs(main.sigma):.1f} sigma, p {main.p:.3f}" + (f" ({holm})" if holm else "")


def _to_decide(j: Judgement, what: str) -> str:
    if j.margin is None:
        return f"no margin to decide {what} (no published delta); MDE {j.mde:.1f}"
    need = j.seeds_to_decide()
    if need:
        return f"{need} seeds would decide {what}"
    fixed = math.sqrt(j.estimate.fixed_var)
    return (f"more seeds would not decide {what}: the held-out set every seed shares leaves ±{fixed:.1f} "
            f"(margin ±{j.margin:g})")


def _control_moved(row: FindingRow, control: Judgement | None) -> bool:
    """The control differs (p < alpha); one that may move the other way counts only in the published direction."""
    if control is None or not control.significant:
        return False
    return row.control_expect != "not-published-sign" or row.sign is None or _same(row, control)


def _control_settled(row: FindingRow, control: Judgement | None) -> bool:
    """The control is a decided tie (or, when it may move the other way, did not move the finding's way)."""
    if control is None:
        return False
    if row.control_expect == "not-published-sign":  # a tie, or moved the other way: never merely undecided
        return control.decided_tie or (control.significant and not _same(row, control))
    return control.decided_tie or bool(by_construction(row, control))  # a check's control may be one
