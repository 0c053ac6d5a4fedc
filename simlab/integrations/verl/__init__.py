"""simlab's credit layer in verl 0.9: the plugin verl loads on every ``import verl``.

pyproject's ``verl.plugins`` entry points name this module and :mod:`.trainer`. This one imports only
verl's ``core_algos``, so it loads wherever verl's estimators do:

- :func:`advantages`: verl's row keys, response mask, rewards (and values, finished flags) in, simlab's
  advantages (any estimator, a per-row weight, the finished-only baseline) and returns out, as torch
  tensors shaped like the response mask;
- :data:`PER_ROW`: simlab's group estimators under ``register_adv_est``, for ``algorithm.adv_estimator``.
  verl hands an estimator rewards, the response mask and the ``uid`` only, so there every row is its own
  rollout; the rollout-aware path is the ``simlab_sync`` trainer's (:mod:`.trainer`).

Options come from ``+algorithm.simlab.*`` (:class:`Settings`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from verl.trainer.ppo.core_algos import register_adv_est

from simlab.credit.estimators import ESTIMATORS
from simlab.credit.normalisers import ROW_WEIGHTS
from simlab.errors import RowsError
from simlab.integrations.batch_file import write_batch
from simlab.integrations.rows import credit, read_rows

OPTIONS_KEY = "algorithm.simlab"
"""Where a verl config holds simlab's options (``+algorithm.simlab.estimator=rollout_group``)."""
PER_ROW = {"simlab_rollout_group": "rollout_group", "simlab_trajectory_group": "trajectory_group"}
"""verl estimator name -> the simlab estimator it runs with every row as its own rollout."""


@dataclass(frozen=True)
class Settings:
    """``+algorithm.simlab.*``: which credit the ``simlab_sync`` trainer writes."""

    estimator: str = "rollout_group"
    """A simlab estimator (``simlab.credit.ESTIMATORS``); the GAE family needs a critic (``critic.enable=True``)."""
    row_weight: str = "none"
    """The per-row weight c_j (``simlab.credit.ROW_WEIGHTS``: none, inverse_k, length_ratio), in the advantages."""
    finished_key: str = "finished"
    """The key of ``AgentLoopOutput.extra_fields`` that says whether a session produced a final answer."""
    dump_dir: str | None = None
    """A folder to write every step's rows into (``batch-<step>.pt``, for ``simlab audit-batch``)."""
    options: dict[str, Any] = field(default_factory=dict)
    """The estimator's own options (baseline, std_normalize, eps, unbiased_std, gamma, lam, ...)."""

    @classmethod
    def read(cls, algorithm: Any) -> Settings:
        """The settings under ``algorithm.simlab`` of a verl config (a DictConfig, a dict, or None)."""
        get = getattr(algorithm, "get", None)
        given = get("simlab", None) if get is not None else None
        values = {str(k): v for k, v in (given or {}).items()}
        own = {k: values.pop(k) for k in ("estimator", "row_weight", "finished_key", "dump_dir") if k in values}
        settings = cls(**own, options=values)
        ESTIMATORS.canonical(settings.estimator, f"{OPTIONS_KEY}.estimator")
        ROW_WEIGHTS.canonical(settings.row_weight, f"{OPTIONS_KEY}.row_weight")
        return settings


def _numpy(x: Any) -> Any:
    return x.detach().cpu().numpy() if isinstance(x, torch.Tensor) else x


def advantages(
    keys: Sequence[str],
    response_mask: torch.Tensor,
    rewards: torch.Tensor,
    settings: Settings,
    *,
    values: torch.Tensor | None = None,
    finished: Sequence[bool] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """((B, T) advantages, (B, T) returns) of simlab's ``settings.estimator`` on verl's rows, float32 on
    the response mask's device. ``keys`` are the rows' ``{uid}_{session_id}_{index}``."""
    rows = read_rows(
        keys, _numpy(response_mask), _numpy(rewards), values=_numpy(values),
        finished=None if finished is None else np.asarray(finished, dtype=np.bool_),
    )
    adv, ret = credit(rows, settings.estimator, row_weight_name=settings.row_weight, **settings.options)
    like = {"dtype": torch.float32, "device": response_mask.device}
    return torch.as_tensor(adv, **like), torch.as_tensor(ret, **like)  # type: ignore[arg-type]


def finished_flags(extra_fields: Sequence[Any], key: str) -> list[bool] | None:
    """(B,) each row's ``extra_fields[key]``; None when no row has it (every session then counts as finished)."""
    has = [isinstance(extra, Mapping) and key in extra for extra in extra_fields]
    if not any(has):
        return None
    flags = []
    for b, extra in enumerate(extra_fields):
        flag = extra.get(key) if has[b] else None
        if not isinstance(flag, (bool, np.bool_)):
            raise RowsError.invalid(f"extra_fields[{b}].{key}", flag, "an agent loop writes True or False on every row")
        flags.append(bool(flag))
    return flags


def dump(folder: str, step: int, keys: Sequence[str], response_mask: torch.Tensor, rewards: torch.Tensor,
         finished: Sequence[bool] | None) -> Path:
    """Write one step's rows to ``folder/batch-<step>.pt`` (:mod:`simlab.integrations.batch_file`)."""
    return write_batch(Path(folder) / f"batch-{step}.pt", keys, _numpy(response_mask), _numpy(rewards), finished)


def _per_row(name: str) -> Any:
    def estimator(
        token_level_rewards: torch.Tensor,
        response_mask: torch.Tensor,
        index: np.ndarray | None = None,
        config: Any = None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        groups = ["0"] * len(response_mask) if index is None else list(index)
        keys = [f"{uid}_{b}_0" for b, uid in enumerate(groups)]  # every row its own session
        settings = Settings.read(config)
        return advantages(keys, response_mask, token_level_rewards, Settings(
            estimator=name, row_weight=settings.row_weight, options=settings.options))

    estimator.__name__ = f"simlab_{name}"
    estimator.__doc__ = f"simlab's {name!r} with every row its own rollout; options from +{OPTIONS_KEY}.*"
    return estimator


for _verl_name, _simlab_name in PER_ROW.items():
    register_adv_est(_verl_name)(_per_row(_simlab_name))
