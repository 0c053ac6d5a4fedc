"""``simlab findings``: each published finding replicated under control, judged, and printed.

``spec`` validates the pre-registered ``[[findings]]`` rows of the specs under ``sweeps/findings/``;
``data`` reads a sweep's runs from the store or from the exports committed in ``analysis/findings/``;
``arms`` selects each arm's runs and its outcome per seed; ``verdicts`` judges a row; ``table`` measures
every row into the findings table; ``text`` prints it; ``predict`` is the one-decision route model that
predicts a credit finding before it runs. (The package is not named ``findings``: that folder holds the
committed exports.)

The package exports nothing itself: import the module a name lives in (one spelling per name), so that
importing one module loads none of the others.
"""
