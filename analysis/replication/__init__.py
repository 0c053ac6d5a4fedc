"""``simlab findings``: each published finding replicated under control, judged, and printed.

``spec`` validates the pre-registered ``[[findings]]`` rows of the specs under ``sweeps/findings/``;
``data`` reads a sweep's runs from the store or from the exports committed in ``analysis/findings/``;
``arms`` selects each arm's runs and its outcome per seed; ``verdicts`` judges a row; ``table`` measures
every row into the findings table; ``text`` prints it; ``predict`` is the one-decision route model that
predicts a credit finding before it runs. (The package is not named ``findings``: that folder holds the
committed exports.)

Names load on first use (PEP 562, :mod:`simlab.lazy`): importing one module of the package loads
none of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simlab import lazy

if TYPE_CHECKING:
    from simlab.analysis.replication.data import EXPORT_DIR, SpecData, live_data, read_export, write_export
    from simlab.analysis.replication.predict import Choice, Kind, RouteModel, expected_gradient
    from simlab.analysis.replication.spec import Design, FindingRow, design, parse_rows
    from simlab.analysis.replication.table import (
        SPEC_DIR,
        Findings,
        dose_figures,
        evaluate_row,
        export,
        gather,
        load_rows,
    )
    from simlab.analysis.replication.text import to_compact, to_markdown
    from simlab.analysis.replication.verdicts import Decision, Family, Levels, Verdict, verdict

_HOME = {
    "data": ("EXPORT_DIR", "SpecData", "live_data", "read_export", "write_export"),
    "predict": ("Choice", "Kind", "RouteModel", "expected_gradient"),
    "spec": ("Design", "FindingRow", "design", "parse_rows"),
    "table": ("SPEC_DIR", "Findings", "dose_figures", "evaluate_row", "export", "gather", "load_rows"),
    "text": ("to_compact", "to_markdown"),
    "verdicts": ("Decision", "Family", "Levels", "Verdict", "verdict"),
}
__all__ = [  # the names in _HOME (tests/policy/test_lazy_exports.py holds the two equal)
    "EXPORT_DIR", "SPEC_DIR", "Choice", "Decision", "Design", "Family", "FindingRow", "Findings", "Kind", "Levels",
    "RouteModel", "SpecData", "Verdict", "design", "dose_figures", "evaluate_row", "expected_gradient", "export",
    "gather", "live_data", "load_rows", "parse_rows", "read_export", "to_compact", "to_markdown", "verdict",
    "write_export",
]
__getattr__ = lazy.exports(__name__, _HOME)
