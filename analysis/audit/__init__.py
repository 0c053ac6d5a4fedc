"""``simlab audit``: the published figures (``published.toml``, :mod:`.data`) and every claim recomputed and
judged from them (:mod:`.table`), with the arithmetic ``simlab report`` applies to simlab's own sweeps.

Names load on first use (PEP 562, :mod:`simlab.lazy`): importing one module of the package loads
none of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from simlab import lazy

if TYPE_CHECKING:
    from simlab.analysis.audit.data import Published, default_data_path, load_published
    from simlab.analysis.audit.table import ablation_table, audit, like_for_like_text, to_markdown

_HOME = {
    "data": ("Published", "default_data_path", "load_published"),
    "table": ("ablation_table", "audit", "like_for_like_text", "to_markdown"),
}
__all__ = [  # the names in _HOME (tests/policy/test_lazy_exports.py holds the two equal)
    "Published", "ablation_table", "audit", "default_data_path", "like_for_like_text", "load_published",
    "to_markdown",
]
__getattr__ = lazy.exports(__name__, _HOME)
