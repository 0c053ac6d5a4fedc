"""simlab's credit against verl 0.9's own code, on CPU, nothing mocked (issue 31).

The fixtures are built as verl's ``tests/trainer/test_multi_trajectories_advantage_on_cpu.py`` builds
them: token rewards and response masks in a ``DataProto``, the ``uid`` as its non-tensor field, and the
row keys ``{uid}_{session_id}_{index}`` beside it. Without verl the module skips (locally) or fails
(CI, ``SIMLAB_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

from tests.services import missing

if importlib.util.find_spec("verl") is None:
    missing("verl is not installed: pip install -e '.[verl]'")

from verl.protocol import DataProto
from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, AdvantageEstimator, agg_loss
from verl.trainer.ppo.ray_trainer import compute_advantage

from simlab.credit import loss_weights
from simlab.integrations.rows import read_rows, row_weight
from simlab.integrations.verl import PER_ROW, Settings, advantages

VERL_EPS = {"eps": 1e-6, "unbiased_std": True}
"""verl's GRPO statistics: torch.std (ddof 1) and epsilon 1e-6."""
KEYS = ["p_0_0", "p_0_1", "p_0_2", "p_1_0", "p_2_0", "p_2_1", "q_0_0", "q_1_0", "q_1_1", "q_2_0"]
"""Two prompts of three sessions each; sessions of 1 to 3 rows."""
MASK = torch.tensor(
    [
        [1, 1, 0, 0, 0],
        [1, 0, 1, 1, 0],  # tool tokens between generated ones
        [1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1],
        [1, 0, 0, 0, 0],
        [0, 1, 1, 0, 0],
        [1, 1, 0, 0, 0],
        [1, 0, 0, 0, 0],
        [1, 1, 1, 1, 0],
        [1, 1, 0, 1, 0],
    ],
    dtype=torch.long,
)
SESSION_REWARD = {"p_0": 1.0, "p_1": 0.0, "p_2": 1.0, "q_0": 0.0, "q_1": 1.0, "q_2": 0.5}


def _token_rewards(keys: list[str], mask: torch.Tensor) -> torch.Tensor:
    """Each session's reward on the last generated token of every one of its rows (verl's reward loop
    copies the final output's score to the session's other rows)."""
    out = torch.zeros(mask.shape, dtype=torch.float32)
    for b, key in enumerate(keys):
        last = int(mask[b].nonzero().max())
        out[b, last] = SESSION_REWARD[key.rsplit("_", 1)[0]]
    return out


def _data(keys: list[str] = KEYS, mask: torch.Tensor = MASK) -> DataProto:
    tensors = {"token_level_rewards": _token_rewards(keys, mask), "response_mask": mask}
    return DataProto.from_dict(tensors=tensors, non_tensors={"uid": np.array([k.split("_")[0] for k in keys],
                                                                             dtype=object)})


def _simlab(data: DataProto, keys: list[str], estimator: str, **options: object) -> torch.Tensor:
    adv, _ = advantages(keys, data.batch["response_mask"], data.batch["token_level_rewards"],
                        Settings(estimator=estimator, options=dict(options)))
    return adv


def _session_path(data: DataProto, keys: list[str]) -> torch.Tensor:
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories  # needs TransferQueue

    return compute_advantage_for_multi_trajectories(data, batch_keys=keys, adv_estimator=AdvantageEstimator.GRPO
                                                    ).batch["advantages"]


def _needs_transfer_queue() -> None:
    if importlib.util.find_spec("transfer_queue") is None:
        missing("verl's v1 trainer needs TransferQueue: pip install -e '.[verl]'")


@pytest.mark.parametrize("std", [True, False])
def test_rollout_group_is_verls_grpo_session_path(std: bool) -> None:
    _needs_transfer_queue()
    data = _data()
    from verl.trainer.ppo.v1.utils import compute_advantage_for_multi_trajectories

    expected = compute_advantage_for_multi_trajectories(
        data, batch_keys=KEYS, adv_estimator=AdvantageEstimator.GRPO, norm_adv_by_std_in_grpo=std
    ).batch["advantages"]
    got = _simlab(_data(), KEYS, "rollout_group", std_normalize=std, **VERL_EPS)
    torch.testing.assert_close(got, expected)
    assert torch.count_nonzero(expected) > 0


def test_a_session_whose_final_row_generated_nothing_verl_zeroes_simlab_credits() -> None:
    """verl reads a session's advantage at its final row's first masked position: with no generated token
    there, the whole session gets 0. simlab credits the session's other rows with its reward."""
    _needs_transfer_queue()
    mask = MASK.clone()
    mask[2] = 0  # p_0's final row generated nothing
    keys_rewards = _data(KEYS, MASK).batch["token_level_rewards"]
    data = DataProto.from_dict(tensors={"token_level_rewards": keys_rewards, "response_mask": mask},
                               non_tensors={"uid": np.array([k.split("_")[0] for k in KEYS], dtype=object)})
    verl_adv = _session_path(data, KEYS)
    simlab_adv = _simlab(data, KEYS, "rollout_group", **VERL_EPS)
    assert torch.count_nonzero(verl_adv[:2]) == 0
    assert torch.all(simlab_adv[:2][mask[:2].bool()] > 0)
    torch.testing.assert_close(simlab_adv[3:], verl_adv[3:])  # the other sessions agree


def _per_row_fixture() -> DataProto:
    """Every row generated a token and carries its session's reward, as the per-row estimators read it."""
    return _data()


def _rows_in_group(keys: list[str]) -> torch.Tensor:
    uids = [k.split("_")[0] for k in keys]
    return torch.tensor([uids.count(u) for u in uids], dtype=torch.float32)


def test_trajectory_group_is_verls_grpo_vectorized_row_by_row() -> None:
    data = _per_row_fixture()
    expected = compute_advantage(data, adv_estimator=AdvantageEstimator.GRPO_VECTORIZED).batch["advantages"]
    torch.testing.assert_close(_simlab(_per_row_fixture(), KEYS, "trajectory_group", **VERL_EPS), expected)


def test_trajectory_group_is_verls_rloo_row_by_row_up_to_n_over_n_minus_1() -> None:
    """verl's RLOO per row: A = n/(n-1) (R - mean over the group's n rows), the trajectory-group advantage
    without the std: a rollout of K rows enters its own baseline K times (the bias SUPO ablates)."""
    for name in (AdvantageEstimator.RLOO, AdvantageEstimator.RLOO_VECTORIZED):
        expected = compute_advantage(_per_row_fixture(), adv_estimator=name).batch["advantages"]
        n = _rows_in_group(KEYS)[:, None]
        got = _simlab(_per_row_fixture(), KEYS, "trajectory_group", std_normalize=False) * n / (n - 1)
        torch.testing.assert_close(got, expected)


def test_rollout_and_trajectory_group_differ_where_k_varies() -> None:
    data = _per_row_fixture()
    rollout = _simlab(data, KEYS, "rollout_group", **VERL_EPS)
    trajectory = _simlab(data, KEYS, "trajectory_group", **VERL_EPS)
    assert not torch.allclose(rollout, trajectory)


MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
"""verl's aggregation modes that simlab names (its ``token-sum`` has no simlab normaliser: it is token-mean
times the batch's token count)."""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("weight", ["none", "inverse_k", "length_ratio"])
def test_agg_loss_of_the_weighted_rows_is_simlabs_loss_weights(mode: str, weight: str) -> None:
    """The row weight rides in the advantages: verl's agg_loss over loss * c_j is simlab's
    sum(w * loss) with w = c_j * b_j, for every aggregation mode."""
    rng = np.random.default_rng(0)
    loss = torch.tensor(rng.normal(size=MASK.shape))
    rows = read_rows(KEYS, MASK.numpy(), np.zeros(len(KEYS)))
    c = torch.tensor(rows.to_trainer(rows.batch.broadcast(row_weight(rows, weight))))
    verl_loss = agg_loss(loss * c, MASK.to(torch.float64), mode)
    options = {"max_tokens": MASK.shape[1]} if mode == "seq-mean-token-sum-norm" else {}  # verl: the padded length
    w = loss_weights(rows.batch, mode, row_weight=weight, **options)
    simlab_loss = float((w * rows.from_trainer(loss.numpy())).sum())
    assert float(verl_loss) == pytest.approx(simlab_loss, rel=1e-7)  # verl adds 1e-8 to each row's token count


def test_a_bare_import_of_verl_registers_simlabs_names() -> None:
    """verl loads the ``verl.plugins`` entry points on import and skips a failing one silently; this
    fails if the plugin did not load."""
    code = ("import verl\nfrom verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY as R\n"
            f"print(sorted(n for n in R if n in {sorted(PER_ROW)!r}))")
    env = {**os.environ, "VERL_USE_EXTERNAL_PLUGINS": "auto", "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == str(sorted(PER_ROW)), out.stdout + out.stderr


def test_the_per_row_estimators_run_through_verls_compute_advantage() -> None:
    """``algorithm.adv_estimator=simlab_rollout_group``: every row its own rollout, so it is verl's grpo
    per row (no rollout-aware baseline without the simlab_sync trainer)."""
    assert set(PER_ROW) <= set(ADV_ESTIMATOR_REGISTRY)
    expected = compute_advantage(_data(), adv_estimator=AdvantageEstimator.GRPO).batch["advantages"]
    from omegaconf import OmegaConf

    config = OmegaConf.create({"simlab": {"unbiased_std": True}})
    got = compute_advantage(_data(), adv_estimator="simlab_rollout_group", config=config).batch["advantages"]
    torch.testing.assert_close(got, expected)


def test_the_trainer_resolves_by_name_and_reads_as_sync() -> None:
    _needs_transfer_queue()
    code = ("import verl\nfrom verl.trainer.ppo.v1 import get_trainer_cls\nc = get_trainer_cls('simlab_sync')\n"
            "t = object.__new__(c); t.trainer_mode = 'simlab_sync'\nprint(c.__name__, t.trainer_mode)")
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "SimlabTrainerSync sync", out.stdout + out.stderr


def test_settings_name_the_key_and_what_is_allowed() -> None:
    from omegaconf import OmegaConf

    from simlab.errors import ConfigError

    with pytest.raises(ConfigError, match=r"`algorithm\.simlab\.estimator='grpo'` is invalid; choose one of"):
        Settings.read(OmegaConf.create({"simlab": {"estimator": "grpo"}}))
    with pytest.raises(ConfigError, match=r"`algorithm\.simlab\.row_weight='1/k'` is invalid"):
        Settings.read(OmegaConf.create({"simlab": {"row_weight": "1/k"}}))
    settings = Settings.read(OmegaConf.create({"simlab": {"estimator": "gae_compaction", "lam": 0.9}}))
    assert settings.estimator == "gae_compaction" and settings.options == {"lam": 0.9}
    assert Settings.read(None) == Settings()
