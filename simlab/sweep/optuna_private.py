"""The few Optuna internals the runner needs: every private access to Optuna is in this module.

The runner manages trials it did not get from ``Study.ask`` (it claims queued grid cells itself, with a
heartbeat recorded before the claim, and fails the trials of dead workers), which Optuna's public API
does not cover. Each function says why its private access is needed; Optuna upgrades should look here
first (``tests/sweep`` exercise every one of them).
"""

from __future__ import annotations

import optuna
from optuna.storages import BaseStorage
from optuna.trial import FrozenTrial, TrialState


def storage(study: optuna.Study) -> BaseStorage:
    """The study's storage.

    Private (``Study._storage``): Study has no public accessor, and only the storage can claim a
    WAITING trial for a chosen process, record a heartbeat for it, or write the user attrs and state of
    a trial that was not asked for in this process (a dead worker's).
    """
    return study._storage


def trial_id(trial: FrozenTrial | optuna.Trial) -> int:
    """The storage's id of a trial (the key every storage method takes).

    Private (``_trial_id``): both trial classes keep it private; their public ``number`` counts within
    the study and is not what the storage is keyed by.
    """
    return int(trial._trial_id)


def waiting_trials(study: optuna.Study) -> list[FrozenTrial]:
    """The study's WAITING trials, read straight from the storage.

    Private (``Study._study_id``): ``storage.get_all_trials`` is keyed by the study's id, which Study
    keeps private; ``Study.get_trials`` would go through the same call with a copy per trial.
    """
    return list(storage(study).get_all_trials(study._study_id, deepcopy=False, states=(TrialState.WAITING,)))


def running_trial(study: optuna.Study, trial_id: int) -> optuna.Trial:
    """A :class:`optuna.Trial` for a trial this process moved to RUNNING itself (see ``claim_waiting``).

    ``optuna.Trial(study, trial_id)`` is a documented constructor that Optuna recommends against calling
    directly, since ``Study.ask`` normally makes trials; the runner claims queued trials without ``ask``
    so that the heartbeat starts before the claim.
    """
    return optuna.Trial(study, trial_id)
