"""Synthetic long-horizon Gymnasium tasks for simlab, registered under the namespace ``simlab``.

``from simlab import tasks`` registers ``simlab/KeyRecall-v0``, ``simlab/PointerChase-v0`` and ``simlab/PeekRead-v0``,
each with a single env (``gymnasium.make``) and a native vector env (``gymnasium.make_vec``). The token
protocol they follow is in docs/tasks-and-harness.md's token-protocol section; named parameter sets are in
``simlab.tasks.presets``.
"""

import gymnasium

from simlab.tasks.config import ConfigError, KeyRecallConfig, PeekReadConfig, PointerChaseConfig, TaskConfig

_ENVS = {
    "simlab/KeyRecall-v0": ("simlab.tasks.envs:KeyRecallEnv", "simlab.tasks.envs:KeyRecallVectorEnv"),
    "simlab/PointerChase-v0": ("simlab.tasks.envs:PointerChaseEnv", "simlab.tasks.envs:PointerChaseVectorEnv"),
    "simlab/PeekRead-v0": ("simlab.tasks.envs:PeekReadEnv", "simlab.tasks.envs:PeekReadVectorEnv"),
}

for _id, (_single, _vector) in _ENVS.items():
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=_single, vector_entry_point=_vector)

ENV_IDS = tuple(_ENVS)

__all__ = ["ENV_IDS", "ConfigError", "KeyRecallConfig", "PeekReadConfig", "PointerChaseConfig", "TaskConfig"]
