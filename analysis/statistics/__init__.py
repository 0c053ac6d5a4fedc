"""The arithmetic every table is judged by: standard errors, differences, power and equivalence, outcomes.

``stats``: SEs of rates and published figures, significance ratios, like-for-like checks, tie-aware ranks;
``levels``: the two-level SE (seeds and held-out instances); ``power``: t quantiles, MDEs, Holm, TOST;
``compare``: arms, their paired differences and the one way they are judged; ``outcomes``: a run's final
success, learning speed and learning gain. Pure functions over arrays and polars frames: nothing here
reads a store or writes a file.

The package exports nothing itself: import the module a name lives in (one spelling per name), so that
importing one module loads none of the others.
"""
