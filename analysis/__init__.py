"""The analysis layer: reports with standard errors, figures, the published-results audit and the findings.

One subpackage per concept: :mod:`.statistics` (the arithmetic every table is judged by), :mod:`.report`
(``simlab report``: a sweep's runs read back, tables and figures), :mod:`.audit` (``simlab audit``: the
published figures recomputed) and :mod:`.replication` (``simlab findings``: each published finding
replicated under control). :mod:`.tables` renders and writes the tables all of them print; :mod:`.summary`
is the per-point summary a sweep writes when it ends. Data beside the code: ``published.toml`` (the audit's
figures), ``predictions.csv`` (the route model's pre-registered predictions) and ``findings/`` (the committed
per-run exports the findings are rebuilt from).
"""
