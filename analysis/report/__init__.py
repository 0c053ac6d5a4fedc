"""``simlab report``: a sweep's runs read back from the store, its variants with every difference beside its
standard error, the health tables, the figures, and the report as Markdown.

``runs`` reads the store; ``build`` pools seeds into variants and writes the report; ``health`` the
credit- and evaluation-health tables; ``published`` the variant pairs beside the published ablations;
``figures`` the PNGs; ``text`` the Markdown.

The package exports nothing itself: import the module a name lives in (one spelling per name), so that
importing one module loads none of the others.
"""
