"""Sweeps: TOML specs (:mod:`.spec`), trial backends (:mod:`.backend`) and the Optuna runner.

A spec (:mod:`.spec`) is a search space (:mod:`.space`: ranges, axes, cells) and a plan. A sweep's two
modes are types: its plan, one per sampler (:mod:`.plan`: grid, tpe), and its trial queue,
one per kind of study storage (:mod:`.queue`: journal file, database; a database's heartbeat and lock are
in :mod:`.rdb`). The runner is four modules over them: the coordinator (:mod:`.runner`), the study and its
trials table (:mod:`.study`), one trial in a worker (:mod:`.trial`), and every write to a trial's state
(:mod:`.lifecycle`). One function turns a cell into a run config: :meth:`.backend.TrialBackend.config`.

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
