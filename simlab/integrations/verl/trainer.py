"""The ``simlab_sync`` trainer: verl 0.9's synchronous PPO trainer with simlab's credit.

``trainer.v1.trainer_mode=simlab_sync`` picks it (``register_trainer``). It is ``PPOTrainerSync`` with one
step replaced: after verl's own ``_compute_advantage`` (which applies the KL penalty in the reward and
the rollout correction as configured), it reads each row's key ``{uid}_{session_id}_{index}``, response
mask, reward, critic values (with a critic) and the ``finished`` flag an agent loop wrote in
``extra_fields``, and writes simlab's advantages and returns (:func:`simlab.integrations.verl.advantages`,
options from ``+algorithm.simlab.*``) over verl's. It imports verl's trainer stack (Ray, TransferQueue,
torchdata); where those are missing, verl skips this plugin and the name is unknown.
"""

from __future__ import annotations

from typing import Any

import transfer_queue as tq
from tensordict import TensorDict
from verl.trainer.ppo.v1.trainer_base import register_trainer
from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
from verl.workers.utils.padding import response_to_nested

from simlab.integrations.verl import Settings, advantages, dump, finished_flags

TRAINER_NAME = "simlab_sync"
SYNC = "sync"
"""The mode name verl's base trainer tests for its synchronous path (replay buffer, refills, checkpoints)."""


@register_trainer(TRAINER_NAME)
class SimlabTrainerSync(PPOTrainerSync):  # type: ignore[misc]  # verl is not followed (pyproject): its classes are Any
    """verl's synchronous PPO trainer whose advantages are simlab's (``+algorithm.simlab.*``)."""

    @property
    def trainer_mode(self) -> str:
        """Always "sync": verl's base class compares the mode name with "sync" to pick the synchronous
        replay buffer and refills, and this trainer is registered under another name."""
        return SYNC

    @trainer_mode.setter
    def trainer_mode(self, _name: str) -> None:  # the base __init__ assigns the configured name
        pass

    def _compute_advantage(self, batch: Any, metrics: dict[str, Any]) -> Any:
        """verl's step, then simlab's advantages and returns written over its own."""
        batch = super()._compute_advantage(batch, metrics)
        settings = Settings.read(self.config.algorithm)
        reward = "token_level_rewards" if self.config.algorithm.use_kl_in_reward else "rm_scores"
        fields = ["response_mask", reward, *(["values"] if self.use_critic else [])]
        data = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=fields)
        response_mask = data["response_mask"]
        padded = data.to_padded_tensor()
        extra = tq.kv_batch_get(keys=batch.keys, partition_id=batch.partition_id, select_fields=["extra_fields"])
        finished = finished_flags(extra["extra_fields"].tolist(), settings.finished_key)
        keys = list(batch.keys)
        if settings.dump_dir is not None:
            dump(settings.dump_dir, self.global_steps, keys, padded["response_mask"], padded[reward], finished)
        adv, ret = advantages(keys, padded["response_mask"], padded[reward], settings,
                              values=padded.get("values", None), finished=finished)
        output = TensorDict(
            {"advantages": response_to_nested(adv, response_mask), "returns": response_to_nested(ret, response_mask)},
            batch_size=len(batch),
        )
        return tq.kv_batch_put(keys=batch.keys, partition_id=batch.partition_id, fields=output)
