"""Sweeps: TOML specs (:mod:`.spec`), trial backends (:mod:`.backend`) and the Optuna runner.

The runner is four modules: the coordinator (:mod:`.runner`), the study and its trials table
(:mod:`.study`), one trial in a worker (:mod:`.trial`), and every write to a trial's state
(:mod:`.lifecycle`); a database study's pieces are in :mod:`.rdb`.

The only package that imports optuna. Import those modules lazily: parsing a spec needs no optuna.
"""

from simlab.errors import BackendError, SpecError
from simlab.sweep.backend import DEFAULT_BACKEND, TrialBackend, load_backend
from simlab.sweep.spec import SweepSpec
from simlab.sweep.spec_parse import load_spec, parse_spec

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
