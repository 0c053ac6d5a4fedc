"""The tables and predictions the docs quote for the recipe, summariser and findings experiments: per-arm tables
from a sweep's exports or live store (``recipe_table``, ``summary_table``), and the route model's committed
predictions (``predict_findings``). Each runs as ``python -m simlab.analysis.experiments.<name>``."""
