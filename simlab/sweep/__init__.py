"""Sweeps: TOML specs (:mod:`.spec`), trial backends (:mod:`.backend`) and the Optuna runner (:mod:`.runner`).

The only package that imports optuna. Import :mod:`.runner` lazily: parsing a spec needs no optuna.
"""

from simlab.errors import BackendError, SpecError
from simlab.sweep.backend import DEFAULT_BACKEND, TrialBackend, load_backend
from simlab.sweep.spec import SweepSpec, load_spec, parse_spec

__all__ = [
    "DEFAULT_BACKEND",
    "BackendError",
    "SpecError",
    "SweepSpec",
    "TrialBackend",
    "load_backend",
    "load_spec",
    "parse_spec",
]
