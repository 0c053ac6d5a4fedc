"""``simlab audit``: the published figures (``published.toml``, :mod:`.data`) and every claim recomputed and
judged from them (:mod:`.table`), with the arithmetic ``simlab report`` applies to simlab's own sweeps.

The package exports nothing itself: import the module a name lives in (one spelling per name), so that
importing one module loads none of the others.
"""
