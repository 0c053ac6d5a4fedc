"""The summariser as a learned bottleneck (issue 42): variable-length summaries, KeyRecall's cue, the
reference agents that bound learning from it, and what the summary metrics count."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from simlab import names
from simlab.errors import ConfigError
from simlab.harness import HarnessConfig, Phase, RolloutBatch, make_agent, run_rollouts
from simlab.harness.compact import summary_extent
from simlab.harness.protocol import Request
from simlab.policy.agent import PolicyAgent
from simlab.policy.config import PolicyConfig
from simlab.policy.model import Policy
from simlab.tasks import keyrecall, vocab
from simlab.tasks.config import KeyRecallConfig
from simlab.tasks.presets import PRESETS
from simlab.train.rollouts import rollout_metrics

END = vocab.END_SUMMARY


def play(preset: str, agent: str | None, n: int = 64, seed: int = 0, **harness: object) -> RolloutBatch:
    """``n`` rollouts of a preset under a reference agent by name, or (``None``) a small untrained policy."""
    p = PRESETS[preset]
    env = gymnasium.make_vec(p.env_id, num_envs=n, vectorization_mode="vector_entry_point", config=p.task)
    cfg = HarnessConfig(**{**p.harness, **harness})
    if agent is None:
        torch.manual_seed(seed)
        shape = PolicyConfig(vocab_size=int(env.single_action_space.n), n_layer=1, n_head=2, d_model=16,
                             max_len=cfg.window + 16)
        actor = PolicyAgent(Policy(shape).eval(), n, generator=torch.Generator().manual_seed(seed))
        return run_rollouts(env, actor, cfg, seed=seed)
    return run_rollouts(env, make_agent(agent, env, seed=seed, quality=1.0), cfg, seed=seed)


# ------------------------------------------------------------------------- where a summary ends
@pytest.mark.parametrize(("tokens", "stop", "extent"), [
    ([20, 21, END, 22], END, (3, 2)),  # the end token is written (chosen) but not kept
    ([END, 20, 21, 22], END, (1, 0)),  # an empty summary
    ([20, 21, 22, 23], END, (4, 4)),  # the budget ran out first
    ([20, END, 21, END], None, (4, 4)),  # fixed length: PAD is filler, every token stays
])
def test_summary_extent_by_hand(tokens: list[int], stop: int | None, extent: tuple[int, int]) -> None:
    assert summary_extent(np.asarray(tokens), stop) == extent


def test_a_policy_writes_summaries_of_its_own_length_and_the_next_segment_holds_them_without_the_end():
    rb = play("keyrecall-mark-budget", None, n=32)
    budget = rb.config.summary_budget
    lengths = [n for r in rb.rollouts for n in r.summary_lengths]
    assert lengths and max(lengths) <= budget and len(set(lengths)) > 1  # an untrained policy ends anywhere
    for r in rb.rollouts:
        segments = rb.segments[slice(*r.segment_rows)]
        for closing, following, kept in zip(segments, segments[1:], r.summary_lengths, strict=False):
            written = closing.tokens[(closing.phase == Phase.SUMMARY) & closing.optimised]
            assert written.size == (kept + 1 if kept < budget else budget)  # content, then the end token
            assert (written[:kept] != END).all() and (written.size == kept or written[-1] == END)
            assert np.isfinite(closing.logprobs[closing.phase == Phase.SUMMARY]).all()
            opened = following.tokens[np.flatnonzero(following.tokens == vocab.SUMMARY)[0] + 1:][:kept]
            np.testing.assert_array_equal(opened, written[:kept])


def test_fixed_length_summaries_are_as_before():
    rb = play("keyrecall-cue", "any_fact")
    assert {n for r in rb.rollouts for n in r.summary_lengths} == {2}
    assert rb.config.summary_room == 2


def test_the_agent_stops_decoding_once_every_row_has_ended():
    env = gymnasium.make_vec("simlab/KeyRecall-v0", num_envs=3, config=PRESETS["keyrecall-cue"].task)
    torch.manual_seed(0)
    policy = Policy(PolicyConfig(vocab_size=int(env.single_action_space.n), n_layer=1, n_head=2, d_model=16,
                                 max_len=64)).eval()
    agent = PolicyAgent(policy, 3, generator=torch.Generator().manual_seed(0))
    only_end = np.zeros(policy.config.vocab_size, dtype=bool)
    only_end[END] = True
    contexts = [np.array([vocab.BOS, vocab.TASK, 20, *vocab.v_sum()])] * 3
    request = Request(phase=Phase.SUMMARY, contexts=contexts, num_tokens=5, allowed=only_end,
                      env_ids=np.arange(3), window=48, stop_token=END)
    before = agent.prefilled_tokens
    gen = agent.generate(request)
    assert gen.tokens.shape == (3, 5) and (gen.tokens == END).all()
    np.testing.assert_array_equal(gen.logprobs, 0.0)
    assert agent.prefilled_tokens - before == 3 * len(contexts[0]) + 3  # the prefill, then one token per row


# ------------------------------------------------------------------------- the cue
@pytest.mark.parametrize("rho", [0.0, 0.5, 1.0])
def test_the_cue_names_the_asked_fact_as_often_as_its_reliability_says(rho: float) -> None:
    cfg = PRESETS["keyrecall-cue"].task.replace(cue_reliability=rho)
    env = gymnasium.make_vec("simlab/KeyRecall-v0", num_envs=4000, config=cfg)
    env.reset(seed=5)
    inst = env.instances
    f = cfg.num_facts
    asked = np.argmax(inst.facts == inst.answer[:, None], axis=1)
    assert (np.sort(inst.facts, axis=1)[:, 1:] != np.sort(inst.facts, axis=1)[:, :-1]).all()  # distinct values
    assert np.mean(inst.cued == asked) == pytest.approx(rho + (1 - rho) / f, abs=0.03)
    k0 = keyrecall.key_tokens(cfg)[0]
    cued_key = inst.prompt[:, keyrecall.cue_position(cfg) - 1]  # the env's prompt has no BOS; a context does
    assert (cued_key >= k0).all() and (cued_key == inst.target).mean() == pytest.approx(np.mean(inst.cued == asked))


def test_without_a_cue_the_prompt_and_the_cued_index_say_so():
    env = gymnasium.make_vec("simlab/KeyRecall-v0", num_envs=8, config=PRESETS["keyrecall-duo"].task)
    env.reset(seed=1)
    assert (env.instances.cued == -1).all() and env.instances.facts.shape == (8, 2)
    assert keyrecall.prompt_len(PRESETS["keyrecall-duo"].task) == 2
    assert keyrecall.prompt_len(PRESETS["keyrecall-cue"].task) == 3


def test_check_env_passes_with_a_cue():
    check_env(gymnasium.make("simlab/KeyRecall-v0", config=PRESETS["keyrecall-cue"].task).unwrapped,
              skip_render_check=True)


# ------------------------------------------------------------------------- the bounds and the metrics
def test_the_cued_agent_is_the_ceiling_and_any_fact_the_floor():
    ceiling = rollout_metrics(play("keyrecall-cue", "cued", n=256), names.TRAIN)
    floor = rollout_metrics(play("keyrecall-cue", "any_fact", n=256), names.TRAIN)
    key = names.metric(names.TRAIN, "{}").format
    assert ceiling[key(names.SUCCESS)] == 1.0 and ceiling[key(names.SUMMARY_HOLDS_CUED)] == 1.0
    assert ceiling[key(names.SUMMARY_HOLDS_UNCUED)] == 0.0  # one pair: the cued one
    # the floor keeps one of three facts at random: a third hold the cued (and asked) one
    assert floor[key(names.SUMMARY_HOLDS_CUED)] == pytest.approx(1 / 3, abs=0.06)
    assert floor[key(names.SUCCESS)] < 0.6
    assert floor[key(names.SUMMARY_LENGTH)] == 2.0


def test_without_a_cue_the_cued_shares_are_not_a_number():
    m = rollout_metrics(play("keyrecall-duo", "scripted"), names.TRAIN)
    key = names.metric(names.TRAIN, "{}").format
    assert np.isnan(m[key(names.SUMMARY_HOLDS_CUED)]) and np.isnan(m[key(names.SUMMARY_HOLDS_UNCUED)])
    assert m[key(names.SUMMARY_LENGTH)] == 4.0


def test_the_cue_agents_need_a_keyrecall_task():
    env = gymnasium.make_vec("simlab/PeekRead-v0", num_envs=2, config=PRESETS["peekread-pos"].task)
    with pytest.raises(ConfigError, match=r"'cued' needs a task whose solver summarises by \['cued', 'random'\]"):
        make_agent("cued", env)


def test_the_task_says_which_agents_its_solver_can_play_and_the_run_refuses_the_others():
    from simlab.harness.agents import agent_fits

    assert agent_fits("cued", PRESETS["keyrecall-cue"].task) is None
    assert agent_fits("scripted", PRESETS["peekread-pos"].task) is None
    assert "summarises by 'cued'" in str(agent_fits("cued", PRESETS["peekread-pos"].task))
    assert "task.cue_reliability" in str(agent_fits("cued", PRESETS["keyrecall-duo"].task))
    assert agent_fits("any_fact", PRESETS["keyrecall-duo"].task) is None  # random order needs no cue


def test_the_task_probe_says_what_a_summary_holds_by_hand():
    """KeyRecall instances with three facts and a cue: the probe's keys are simlab.names.SUMMARY_HOLDS'; without
    a cue (keyrecall-duo) ``answer`` and ``all_facts`` (both pairs) apply."""
    env = gymnasium.make_vec("simlab/KeyRecall-v0", num_envs=1, config=PRESETS["keyrecall-cue"].task)
    env.reset(seed=0)
    inst = env.unwrapped.instances if hasattr(env, "unwrapped") else env.instances
    facts, cued, answer = inst.facts[0], int(inst.cued[0]), int(inst.answer[0])
    other = int(facts[(cued + 1) % facts.size])
    assert inst.summary_holds(0, np.array([0, facts[cued]])) == {"answer": answer == facts[cued], "cued": True,
                                                                  "uncued": False, "all_facts": False}
    assert inst.summary_holds(0, np.array([0, other])) == {"answer": answer == other, "cued": False, "uncued": True,
                                                           "all_facts": False}
    assert inst.summary_holds(0, facts)["all_facts"] and inst.summary_holds(0, facts)["uncued"]
    assert set(inst.summary_holds(0, np.array([], dtype=np.int64)).values()) == {False}
    assert set(names.SUMMARY_HOLDS) == {"answer", "cued", "uncued", "all_facts"}
    env = gymnasium.make_vec("simlab/KeyRecall-v0", num_envs=8, config=PRESETS["keyrecall-duo"].task)
    env.reset(seed=0)
    i = next(i for i, f in enumerate(env.instances.facts) if f[0] != f[1])  # two facts with two values, no cue
    both = env.instances.facts[i]
    assert env.instances.summary_holds(i, both) == {"answer": True, "all_facts": True}
    assert env.instances.summary_holds(i, both[:1])["all_facts"] is False


def test_an_env_without_a_probe_leaves_every_summary_share_unknown():
    """A plain gymnasium vector env over the single env has no instances to ask: the shares are NaN, not 0."""
    env = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("simlab/KeyRecall-v0",
                                                                 config=PRESETS["keyrecall-mini"].task)] * 4)
    preset = PRESETS["keyrecall-mini"]
    rb = run_rollouts(env, "random", HarnessConfig(**preset.harness), seed=0)
    assert sum(r.summaries for r in rb.rollouts) > 0 and all(r.summary_holds == {} for r in rb.rollouts)
    m = rollout_metrics(rb, names.TRAIN)
    assert all(np.isnan(m[names.metric(names.TRAIN, name)]) for name in names.SUMMARY_HOLDS.values())


def test_the_episode_table_counts_each_episodes_summaries_and_those_holding_its_answer():
    """Per episode (simlab.names.EPISODE_SUMMARY_COLUMNS): the oracle's summaries all hold the answer, a random
    writer's some; an env without a probe leaves the count null; an old table without the columns concatenates
    with a new one (nulls)."""
    import polars as pl

    from simlab.train.rollouts import episode_rows

    oracle = episode_rows(play("keyrecall-cue", "cued", n=32), "compacted", 100, 0)
    assert oracle.columns == [*names.EPISODE_COLUMNS, *names.EPISODE_SUMMARY_COLUMNS]
    assert oracle["summaries"].sum() > 0
    assert (oracle["summaries_holding_answer"] == oracle["summaries"]).all()
    floor = episode_rows(play("keyrecall-cue", "any_fact", n=64), "compacted", 100, 0)
    assert 0 < floor["summaries_holding_answer"].sum() < floor["summaries"].sum()
    env = gymnasium.vector.SyncVectorEnv([lambda: gymnasium.make("simlab/KeyRecall-v0",
                                                                 config=PRESETS["keyrecall-mini"].task)] * 4)
    plain = episode_rows(run_rollouts(env, "random", HarnessConfig(**PRESETS["keyrecall-mini"].harness), seed=0),
                         "compacted", 0, 0)
    written = plain.filter(pl.col("summaries") > 0)
    assert written.height > 0 and written["summaries_holding_answer"].is_null().all()
    mixed = pl.concat([oracle.select(names.EPISODE_COLUMNS), oracle], how="diagonal_relaxed")
    assert mixed["summaries"].null_count() == oracle.height


def test_bad_task_settings_are_refused():
    with pytest.raises(ConfigError, match="cue_reliability"):
        KeyRecallConfig(cue_reliability=1.5)
    with pytest.raises(ConfigError, match="summary_budget"):
        HarnessConfig(window=48, summary_budget=48)


# ------------------------------------------------------------------------- a summary cut at its budget
@pytest.mark.parametrize("cut", ["keep", "truncate", "fail"])
def test_a_summary_cut_at_its_budget_is_kept_or_ends_the_rollout(cut: str) -> None:
    rb = play("keyrecall-mark-budget", None, n=64, seed=5, cut_summary=cut)  # an untrained policy rarely ends
    cuts = [r for r in rb.rollouts if r.summaries_cut]
    assert cuts and all(r.summaries_cut <= r.summaries for r in rb.rollouts)
    assert rollout_metrics(rb, names.TRAIN)[names.metric(names.TRAIN, names.SUMMARY_CUT)] == pytest.approx(
        sum(r.summaries_cut for r in rb.rollouts) / sum(r.summaries for r in rb.rollouts))
    assert any(r.overlong == "summary" for r in cuts) == (cut != "keep")
    for r in cuts:
        ended_there = r.overlong == "summary"
        assert ended_there == (cut != "keep")
        if ended_there:  # the cut summary is its last: no segment opened after it
            assert r.summaries_cut == 1 and r.compactions == r.summaries - 1 and r.reward == 0.0
            assert r.finished == (cut == "fail")
            assert r.segment_rows[1] - r.segment_rows[0] == r.compactions + 1


def test_fixed_length_summaries_are_never_cut_and_a_cut_rule_needs_a_budget() -> None:
    rb = play("keyrecall-mark", None, n=16, seed=5)
    assert all(r.summaries_cut == 0 for r in rb.rollouts)
    with pytest.raises(ConfigError, match=r"harness\.cut_summary='truncate'` is invalid; choose 'keep' unless"):
        HarnessConfig(**{**PRESETS["keyrecall-mark"].harness, "cut_summary": "truncate"}).check()
