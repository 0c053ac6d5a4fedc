"""Synthetic long-horizon Gymnasium tasks for simlab (namespace ``simlab``)."""
