"""The sweep specs shipped with simlab (installed as ``simlab.specs``; read with :mod:`importlib.resources`)."""
