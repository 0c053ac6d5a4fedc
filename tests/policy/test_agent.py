"""PolicyAgent's compute counters: tokens through the trunk and the keys they attended to."""

from __future__ import annotations

import gymnasium
import pytest
import torch

from simlab import tasks  # noqa: F401  (registers the envs)
from simlab.harness import HarnessConfig, run_rollouts
from simlab.policy import Policy, PolicyConfig
from simlab.policy.agent import PolicyAgent
from simlab.tasks.config import KeyRecallConfig


def play(trigger: str, window: int) -> tuple[PolicyAgent, list[int], int]:
    task = KeyRecallConfig(num_facts=1, horizon=(6, 6), vocab_size=24, obs_tokens=(3, 4))
    env = gymnasium.make_vec("simlab/KeyRecall-v0", num_envs=4, vectorization_mode="vector_entry_point",
                             config=task)
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(vocab_size=24, n_layer=1, n_head=2, d_model=16, max_len=window + 16)).eval()
    agent = PolicyAgent(policy, 4, generator=torch.Generator().manual_seed(0))
    harness = HarnessConfig(window=window, trigger=trigger, summary_tokens=2, max_compactions=8, max_steps=10)
    rb = run_rollouts(env, agent, harness, seed=3)
    return agent, [s.tokens.size for s in rb.segments], int(rb.batch.segments_per_rollout.sum())


def test_without_compaction_each_token_attends_to_its_whole_prefix():
    agent, lengths, segments = play("none", 96)
    assert segments == 4  # one segment per rollout: the cache row only ever grows
    assert agent.prefilled_tokens == sum(lengths)
    assert agent.attended_keys == sum(n * (n + 1) // 2 for n in lengths)


@pytest.mark.parametrize("window", [32, 40])
def test_with_compaction_no_token_attends_to_more_than_the_row_holds(window):
    agent, lengths, segments = play("threshold", window)
    assert segments > 4
    tokens = agent.prefilled_tokens
    assert tokens >= sum(lengths)  # new segments re-prefill the prompt and the summary
    assert agent.attended_keys <= tokens * (window + 16)
