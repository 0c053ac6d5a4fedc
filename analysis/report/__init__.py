"""``simlab report``: a sweep's runs read back from the store, its variants with every difference beside its
standard error, the health tables, the figures, and the report as Markdown.

``runs`` reads the store; ``build`` pools seeds into variants and writes the report; ``health`` the
credit- and evaluation-health tables; ``published`` the variant pairs beside the published ablations;
``figures`` the PNGs; ``text`` the Markdown.

Names load on first use (PEP 562, :mod:`simlab.lazy`): importing one module of the package loads
none of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simlab import lazy

if TYPE_CHECKING:
    from simlab.analysis.report.build import (
        Levels,
        Report,
        build_report,
        default_out_dir,
        ranking_table,
        speed_table,
        variant_table,
    )
    from simlab.analysis.report.figures import FIGURES, write_figures
    from simlab.analysis.report.runs import SweepRuns, load_runs
    from simlab.analysis.report.text import to_markdown

_HOME = {
    "build": ("Levels", "Report", "build_report", "default_out_dir", "ranking_table", "speed_table", "variant_table"),
    "figures": ("FIGURES", "write_figures"),
    "runs": ("SweepRuns", "load_runs"),
    "text": ("to_markdown",),
}
__all__ = [  # the names in _HOME (tests/policy/test_lazy_exports.py holds the two equal)
    "FIGURES", "Levels", "Report", "SweepRuns", "build_report", "default_out_dir", "load_runs", "ranking_table",
    "speed_table", "to_markdown", "variant_table", "write_figures",
]
__getattr__ = lazy.exports(__name__, _HOME)
