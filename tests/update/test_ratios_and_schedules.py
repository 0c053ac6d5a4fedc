"""The importance ratios (token, segment: GSPO) and the learning-rate schedules: contracts over every
registered name, hand-computed cases, GSPO's sequence-level gradient as the reference, bad input."""

from __future__ import annotations

import functools
import itertools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from simlab.errors import ConfigError
from simlab.update import OPTIMISERS, RATIOS, SCHEDULES, SGD, Adam, clipped_policy_loss, lr_factor

F64 = torch.float64


@pytest.mark.parametrize("name", RATIOS.names())
def test_ratio_contract(name):
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.1, -4.0]], dtype=F64, requires_grad=True)
    old = logp.detach().clone()
    w = torch.tensor([[0.2, 0.2, 0.0], [0.1, 0.0, 0.0]], dtype=F64)
    adv = torch.tensor([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0]], dtype=F64)
    loss, stats = clipped_policy_loss(logp, old, adv, w, ratio=name)
    assert float(loss.detach()) == pytest.approx(-(0.4 - 0.1))  # ratio 1 everywhere: -sum w A
    loss.backward()
    assert logp.grad is not None and (logp.grad[w == 0] == 0).all()
    assert stats.clip_fraction == 0.0 and stats.approx_kl == pytest.approx(0.0)
    assert "=" in (RATIOS.get(name).__doc__ or "")


def test_segment_ratio_is_the_geometric_mean_over_counted_tokens():
    log_ratio = torch.tensor([[0.1, 0.3, 5.0], [0.4, 0.0, 0.0]], dtype=F64)
    mask = torch.tensor([[True, True, False], [True, False, False]])
    r = RATIOS.get("segment")(log_ratio, mask)
    torch.testing.assert_close(r[0], torch.full((3,), math.exp(0.2), dtype=F64))
    torch.testing.assert_close(r[1], torch.full((3,), math.exp(0.4), dtype=F64))
    assert RATIOS.canonical("gspo") == "segment"


def test_the_segment_clip_acts_on_the_whole_row():
    # row mean log ratio 0.5: s = e^0.5 > 1 + 0.28 with A > 0, so every token of the row is clipped
    logp = torch.tensor([[0.2, 0.8]], dtype=F64, requires_grad=True)
    w = torch.full((1, 2), 0.5, dtype=F64)
    loss, stats = clipped_policy_loss(logp, torch.zeros(1, 2, dtype=F64), torch.ones(1, 2, dtype=F64), w,
                                      ratio="segment")
    loss.backward()
    assert logp.grad is not None and not logp.grad.any()
    assert stats.clip_fraction == 1.0
    assert float(loss.detach()) == pytest.approx(-1.28)
    # the token ratio clips only the token whose own ratio left the range (e^0.8; e^0.2 = 1.22 stays)
    logp.grad = None
    loss, stats = clipped_policy_loss(logp, torch.zeros(1, 2, dtype=F64), torch.ones(1, 2, dtype=F64), w)
    loss.backward()
    assert stats.clip_fraction == 0.5 and logp.grad[0, 0] < 0 and logp.grad[0, 1] == 0


def gspo_sequence_loss(logp, old, adv_row, w_row, mask, eps_low, eps_high):
    """GSPO's sequence-level objective (eq. 5), one term per row, weighted by the row's total weight."""
    n = mask.sum(-1).clamp_min(1)
    s = torch.exp(((logp - old) * mask).sum(-1) / n)
    per_row = -torch.minimum(s * adv_row, torch.clamp(s, 1 - eps_low, 1 + eps_high) * adv_row)
    return (w_row * n * per_row).sum()


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.lists(st.floats(-0.3, 0.3), min_size=1, max_size=6), st.floats(-2.0, 2.0), st.floats(0.0, 1.0)),
        min_size=1, max_size=5,
    ),
    eps=st.sampled_from([(0.2, 0.28), (3e-4, 4e-4)]),
)
def test_segment_ratio_gradient_is_gspos_sequence_gradient(rows, eps):
    # with an advantage and a weight constant over each row, GSPO-token's gradient is GSPO's
    width = max(len(r[0]) for r in rows)
    logp = torch.zeros(len(rows), width, dtype=F64)
    mask = torch.zeros(len(rows), width, dtype=F64)
    for i, (lr, _, _) in enumerate(rows):
        logp[i, : len(lr)] = torch.tensor(lr, dtype=F64)
        mask[i, : len(lr)] = 1.0
    adv_row = torch.tensor([r[1] for r in rows], dtype=F64)
    w_row = torch.tensor([r[2] for r in rows], dtype=F64)
    old = torch.zeros_like(logp)
    a = logp.clone().requires_grad_(True)
    loss, _ = clipped_policy_loss(a, old, adv_row[:, None] * mask, w_row[:, None] * mask, eps_low=eps[0],
                                  eps_high=eps[1], ratio="segment")
    loss.backward()
    b = logp.clone().requires_grad_(True)
    ref = gspo_sequence_loss(b, old, adv_row, w_row * (w_row > 0), mask * (w_row[:, None] > 0), *eps)
    ref.backward()
    torch.testing.assert_close(float(loss.detach()), float(ref.detach()), rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-12)


def test_one_token_rows_make_the_two_ratios_agree():
    logp = torch.tensor([[0.3], [-0.4], [0.1]], dtype=F64)
    adv = torch.tensor([[1.0], [-1.0], [2.0]], dtype=F64)
    w = torch.full((3, 1), 1 / 3, dtype=F64)
    grads = []
    for name in ("token", "segment"):
        x = logp.clone().requires_grad_(True)
        loss, _ = clipped_policy_loss(x, torch.zeros_like(logp), adv, w, ratio=name)
        loss.backward()
        grads.append((float(loss.detach()), x.grad))
    assert grads[0][0] == pytest.approx(grads[1][0])
    torch.testing.assert_close(grads[0][1], grads[1][1])


def test_unknown_ratio_lists_the_valid_ones():
    t = torch.zeros(1, 2)
    with pytest.raises(ConfigError, match=r"`ratio='sequence'` is invalid; choose one of 'token', 'segment'"):
        clipped_policy_loss(t, t, t, t, ratio="sequence")


# ---------------------------------------------------------------- schedules
@pytest.mark.parametrize("name", SCHEDULES.names())
def test_schedule_contract(name):
    fn = SCHEDULES.get(name)
    values = [fn(p / 10) for p in range(15)]
    assert values[0] == 1.0
    assert all(0.0 <= v <= 1.0 for v in values)
    assert all(a >= b for a, b in itertools.pairwise(values))  # never rises
    assert values[10] == values[14]  # flat once the planned units are used
    assert "f(p) = " in (fn.__doc__ or "")


def test_schedules_by_hand():
    assert lr_factor("constant", 80, 40) == 1.0
    assert lr_factor("linear", 10, 40) == pytest.approx(0.75)
    assert lr_factor("linear", 50, 40) == 0.0
    assert lr_factor("cosine", 20, 40) == pytest.approx(0.5)
    # counted by rows, a batch with K = 2 rows per rollout uses the schedule twice as fast
    assert lr_factor("linear", 2 * 10, 40) == pytest.approx(lr_factor("linear", 10, 20))


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("step", 1, 2), r"`lr_schedule='step'` is invalid; choose one of 'constant', 'linear', 'cosine'"),
        (("linear", 1, 0), r"`planned=0` is invalid; choose a finite value > 0"),
        (("linear", -1, 2), r"`used=-1` is invalid; choose a finite value >= 0"),
    ],
)
def test_lr_factor_rejects(args, match):
    with pytest.raises(ConfigError, match=match):
        lr_factor(*args)


def test_optimiser_contract():
    # each optimiser takes (params, lr) and steps the parameters it was given
    for name in OPTIMISERS.names():
        p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
        opt = OPTIMISERS.get(name)([p], 0.1)
        (p * torch.tensor([3.0, 0.5])).sum().backward()
        opt.step()
        assert not torch.equal(p.detach(), torch.tensor([1.0, -2.0])), name


def test_sgd_steps_with_the_gradients_scale_and_adam_does_not():
    # by hand: SGD moves by lr x g, so doubling g doubles the step; Adam's first step is lr x sign(g)
    def first_step(name: str, scale: float) -> torch.Tensor:
        p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
        opt = OPTIMISERS.get(name)([p], 0.1)
        (p * scale * torch.tensor([3.0, 0.5])).sum().backward()
        opt.step()
        return p.detach() - torch.tensor([1.0, -2.0])

    torch.testing.assert_close(first_step("sgd", 1.0), torch.tensor([-0.3, -0.05]))
    torch.testing.assert_close(first_step("sgd", 2.0), torch.tensor([-0.6, -0.1]))
    torch.testing.assert_close(first_step("adam", 1.0), first_step("adam", 2.0))
    torch.testing.assert_close(first_step("adam", 1.0), torch.tensor([-0.1, -0.1]), atol=1e-6, rtol=0)


@pytest.mark.parametrize("lr", [1e-3, 0.3])
def test_adam_and_sgd_step_bit_for_bit_as_torch_optim_does_on_the_cpu(lr):
    # reference: torch.optim's own Adam and SGD, the same model, gradients and learning-rate changes
    def run(make) -> list[torch.Tensor]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
        opt = make(model.parameters())
        x = torch.randn(11, 5)
        for step in range(25):
            opt.param_groups[0]["lr"] = lr * (1 - step / 50)
            opt.zero_grad(set_to_none=True)
            (model(x) ** 2).mean().backward()
            opt.step()
        return [p.detach().clone() for p in model.parameters()]

    for mine, torchs in ((Adam, torch.optim.Adam), (SGD, torch.optim.SGD)):
        got = run(functools.partial(mine, lr=lr))
        want = run(functools.partial(torchs, lr=lr))
        assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True)), mine.__name__
