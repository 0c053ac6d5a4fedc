"""How the update and behaviour cloning cut a batch into mini-batches, and that the cut changes no gradient.

The loss is the whole batch's, accumulated over mini-batches into one optimiser step, so length
buckets and the padded random mini-batches (``train.length_buckets = false``) must give the same
gradient up to float rounding; the buckets just skip the padding.
"""

from __future__ import annotations

import copy

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simlab import names
from simlab.config import resolve
from simlab.harness.phases import phase_table
from simlab.policy.model import Policy
from simlab.train.base import imitation_step
from simlab.train.rl import Trainer
from simlab.train.rollouts import collect
from simlab.train.tokens import TokenBatch, length_buckets
from simlab.update import SGD

from .conftest import tiny


@settings(max_examples=200, deadline=None)
@given(
    lengths=st.lists(st.integers(1, 60), min_size=1, max_size=120),
    max_rows=st.integers(1, 64),
    max_tokens=st.sampled_from([0, 1, 31, 100, 1024]),
)
def test_length_buckets_cover_every_row_once_within_both_bounds(lengths, max_rows, max_tokens):
    lens = torch.tensor(lengths)
    batches = length_buckets(lens, max_rows=max_rows, max_tokens=max_tokens)
    rows = torch.cat([mb.rows for mb in batches])
    assert sorted(rows.tolist()) == list(range(len(lengths)))
    for mb in batches:
        assert mb.width == int(lens[mb.rows].max())  # cut to its longest row, so nothing real is cut off
        assert len(mb.rows) <= max_rows
        assert not max_tokens or len(mb.rows) == 1 or len(mb.rows) * mb.width <= max_tokens
    if len(batches) == 1:  # a batch that fits keeps its rows in order
        assert batches[0].rows.tolist() == list(range(len(lengths)))


def test_length_buckets_pad_less_than_the_padded_batch():
    lens = torch.tensor([5, 30, 6, 29, 7, 31, 8, 28] * 8)
    batches = length_buckets(lens, max_rows=16, max_tokens=256)
    slots = sum(len(mb.rows) * mb.width for mb in batches)
    assert slots < 0.7 * len(lens) * int(lens.max())


def rollout_batch(cfg):
    torch.manual_seed(0)
    policy = Policy(cfg.policy)
    rb, env, _ = collect(cfg, policy, harness=cfg.harness, prompts=cfg.train.prompts, group_size=cfg.train.group_size,
                         seed=11, generator=torch.Generator().manual_seed(0))
    return policy, rb, torch.from_numpy(phase_table(env, cfg.harness.trigger))


def sgd_step(trainer: Trainer, update, tb, table, grids):
    """The parameter change of one update with plain SGD at lr 1: minus the clipped accumulated gradient."""
    model = trainer.critic if update == "critic" else trainer.policy
    before = [p.detach().clone() for p in model.parameters()]
    trainer.opt = SGD(trainer.policy.parameters(), lr=1.0)
    if trainer.critic_opt is not None:
        trainer.critic_opt = SGD(trainer.critic.parameters(), lr=1.0)
    stats = (trainer.update_critic if update == "critic" else trainer.update_policy)(tb, table, grids, 0)
    return [p.detach() - b for p, b in zip(model.parameters(), before, strict=True)], stats


def update_of(nested, buckets: bool, update: str):
    train = {**nested["train"], "length_buckets": buckets, "max_grad_norm": 1e9}
    cfg = resolve(tiny(**{**nested, "train": train}))
    policy, rb, table = rollout_batch(cfg)
    trainer = Trainer(cfg, copy.deepcopy(policy))
    tb = TokenBatch.from_rollouts(rb, policy.device)
    if not buckets:
        tb = tb.pad_rows(-(-tb.tokens.shape[0] // cfg.train.minibatch_segments) * cfg.train.minibatch_segments)
    _, grids, _ = trainer.credit(rb, tb, trainer.critic_values(tb, table))
    return sgd_step(trainer, update, tb, table, grids)


def assert_same_step(a, b):
    for x, y in zip(a, b, strict=True):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-7)


def test_length_buckets_give_the_padded_updates_gradient():
    nested = {"train": {"recipe": "supo", "minibatch_segments": 8, "minibatch_tokens": 96, "epochs": 2}}
    new, stats_new = update_of(nested, True, "policy")
    old, stats_old = update_of(nested, False, "policy")
    assert any(bool(d.abs().max() > 0) for d in new)
    assert_same_step(new, old)
    assert abs(stats_new[names.LOSS_POLICY] - stats_old[names.LOSS_POLICY]) < 1e-6


def test_length_buckets_give_the_padded_critics_gradient():
    nested = {"train": {"recipe": "compactionrl", "minibatch_segments": 8, "minibatch_tokens": 96},
              "harness": {"window": 64}}
    new, stats_new = update_of(nested, True, "critic")
    old, stats_old = update_of(nested, False, "critic")
    assert_same_step(new, old)
    assert abs(stats_new[names.LOSS_VALUE] - stats_old[names.LOSS_VALUE]) < 1e-6


def test_behaviour_cloning_in_buckets_takes_the_one_pass_step():
    cfg = resolve(tiny())
    rb, env, _ = collect(cfg, None, harness=cfg.harness, prompts=16, group_size=1, seed=3, teacher="scripted")
    table = torch.from_numpy(phase_table(env, cfg.harness.trigger))
    tb = TokenBatch.from_rollouts(rb, torch.device("cpu"))
    torch.manual_seed(0)
    start = Policy(cfg.policy)
    steps, losses = [], []
    for max_tokens in (0, 64):
        policy = copy.deepcopy(start)
        opt = SGD(policy.parameters(), lr=1.0)
        losses.append(float(imitation_step(policy, opt, tb, table, max_tokens, 0)))
        steps.append([p.detach() - q.detach() for p, q in zip(policy.parameters(), start.parameters(), strict=True)])
    assert len(length_buckets(tb.lengths, max_rows=10**6, max_tokens=64)) > 1
    assert abs(losses[0] - losses[1]) < 1e-5
    assert_same_step(*steps)
