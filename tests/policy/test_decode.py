"""KV-cache decoding against full recomputation, phase masks, sampling and training scores."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest
import torch

from simlab.errors import ConfigError
from simlab.policy import Decoder, Policy, masked_log_softmax, sample, score_tokens
from tests.policy.conftest import VOCAB, tiny_policy


def pad(rows: list[list[int]], width: int | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token lists with a junk id (padding must never matter) -> tokens (B, T), lengths (B,)."""
    width = max([len(r) for r in rows] + [1]) if width is None else width
    tokens = torch.full((len(rows), width), VOCAB - 1, dtype=torch.long)
    for b, row in enumerate(rows):
        tokens[b, : len(row)] = torch.tensor(row, dtype=torch.long)
    return tokens, torch.tensor([len(r) for r in rows])


def full_last(policy: Policy, rows: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (B, V) and values (B,) at each row's last token, recomputed from scratch."""
    tokens, lengths = pad(rows)
    with torch.no_grad():
        out = policy(tokens)
    index = torch.arange(len(rows)), lengths - 1
    assert out.values is not None
    return out.logits[index], out.values[index]


def rand_tokens(rng: random.Random, n: int) -> list[int]:
    return [rng.randrange(VOCAB) for _ in range(n)]


@pytest.mark.parametrize(("seed", "fused"), [(0, True), (1, True), (2, False)])
def test_kv_cache_matches_full_recompute_over_random_ragged_operations(seed: int, fused: bool) -> None:
    rng = random.Random(seed)
    policy = tiny_policy(seed, fused_attention=fused)
    B, cap = 5, policy.config.max_len
    decoder = Decoder(policy, B)
    rows = [rand_tokens(rng, rng.randint(1, 9)) for _ in range(B)]
    decoder.prefill(*pad(rows))
    for _ in range(25):
        op = rng.choice(["decode", "extend", "reset"])
        if op == "decode":
            active = [rng.random() < 0.7 and len(r) < cap for r in rows]
            nxt = rand_tokens(rng, B)
            decoder.decode_step(torch.tensor(nxt), torch.tensor(active))
            for b in range(B):
                rows[b] += [nxt[b]] if active[b] else []
        elif op == "extend":
            new = [rand_tokens(rng, rng.randint(0, min(6, cap - len(r)))) for r in rows]
            decoder.extend(*pad(new, width=7))
            for b in range(B):
                rows[b] += new[b]
        else:  # a compaction: some rows restart from a fresh (shorter) context
            picked = rng.sample(range(B), rng.randint(1, B))
            fresh = [rand_tokens(rng, rng.randint(1, 12)) for _ in picked]
            decoder.reset_rows(torch.tensor(picked), *pad(fresh))
            for b, row in zip(picked, fresh, strict=True):
                rows[b] = row
        assert decoder.lengths.tolist() == [len(r) for r in rows]
        logits, values = full_last(policy, rows)
        state = decoder.state()
        assert state.values is not None
        torch.testing.assert_close(state.logits, logits, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(state.values, values, atol=1e-4, rtol=1e-4)


def test_every_position_of_a_ragged_append_matches_full_recompute() -> None:
    policy = tiny_policy(4)
    first = [[1, 2, 3], [4], [5, 6, 7, 8, 9]]
    second = [[10, 11], [12, 13, 14, 15], []]
    cache = policy.new_cache(3)
    with torch.no_grad():
        policy.forward_cached(*pad(first), cache=cache)
        tokens, n_new = pad(second)
        new = policy.heads(policy.forward_cached(tokens, n_new, cache)).logits  # (B, T, V)
        full = policy(pad([a + b for a, b in zip(first, second, strict=True)])[0]).logits
    for b in range(3):
        for t in range(len(second[b])):
            torch.testing.assert_close(new[b, t], full[b, len(first[b]) + t], atol=1e-4, rtol=1e-4)


def test_overflowing_max_len_names_the_rows_and_leaves_the_cache_usable() -> None:
    policy = tiny_policy()
    decoder = Decoder(policy, 2)
    rows = [[1] * 48, [2] * 3]
    decoder.prefill(*pad(rows))
    with pytest.raises(ValueError, match=r"rows \[0\] would hold more than policy.max_len=48"):
        decoder.decode_step(torch.tensor([3, 3]))
    decoder.decode_step(torch.tensor([3, 3]), active=torch.tensor([False, True]))
    torch.testing.assert_close(decoder.state().logits, full_last(policy, [rows[0], [2, 2, 2, 3]])[0])


def test_sampling_before_prefill_is_an_error() -> None:
    decoder = Decoder(tiny_policy(), 2)
    decoder.prefill(*pad([[1, 2], []]))
    with pytest.raises(ValueError, match=r"rows \[1\] hold no tokens"):
        decoder.sample()


def test_phase_mask_is_never_violated_even_when_the_model_prefers_disallowed_tokens() -> None:
    gen = torch.Generator().manual_seed(0)
    B = 256
    allowed = torch.rand(B, VOCAB, generator=gen) < 0.2
    allowed[torch.arange(B), torch.randint(0, VOCAB, (B,), generator=gen)] = True
    # Disallowed tokens get huge logits: an unmasked sampler would pick them almost surely.
    logits = torch.where(allowed, 0.0, 30.0) + torch.randn(B, VOCAB, generator=gen)
    for temperature in (0.3, 1.0, 5.0):
        for _ in range(10):
            tokens, logp = sample(logits, allowed, temperature=temperature, generator=gen)
            assert bool(allowed[torch.arange(B), tokens].all())
            assert bool(torch.isfinite(logp).all()) and bool((logp <= 0).all())
    tokens, _ = sample(logits, allowed, greedy=True)
    expected = logits.masked_fill(~allowed, float("-inf")).argmax(-1)
    assert torch.equal(tokens, expected)
    allowed[3] = False
    with pytest.raises(ValueError, match=r"rows \[3\] allow no token"):
        sample(logits, allowed)


def test_masked_distribution_hand_case() -> None:
    # Equal logits, 3 of 5 tokens allowed: each allowed token has p = 1/3, entropy log 3.
    logits = torch.zeros(1, 5)
    allowed = torch.tensor([[True, False, True, True, False]])
    logp = masked_log_softmax(logits, allowed)
    torch.testing.assert_close(logp[0, [0, 2, 3]], torch.full((3,), -math.log(3)))
    assert torch.isinf(logp[0, [1, 4]]).all()
    # Temperature 2 halves the gap: logits [0, 2] -> [0, 1] -> p = [1, e] / (1 + e).
    logp = masked_log_softmax(torch.tensor([[0.0, 2.0]]), temperature=2.0)
    torch.testing.assert_close(logp.exp(), torch.tensor([[1.0, math.e]]) / (1 + math.e))
    with pytest.raises(ConfigError, match="`temperature=0` is invalid"):
        masked_log_softmax(logits, allowed, temperature=0)


def rollout(
    policy: Policy, seed: int, temperature: float = 0.8
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """A toy rollout: prompt, then alternating sampled actions (phase A) and env observations.

    Returns tokens (B, T), allowed (B, T, V), optimised mask (B, T), sampled log-probs and values (B, T).
    Rows are ragged: observations have row-dependent lengths.
    """
    gen = torch.Generator().manual_seed(seed)
    B = 4
    phase_masks = torch.rand(3, VOCAB, generator=gen) < 0.4  # three phases, e.g. action/summary/answer
    phase_masks[:, 0] = True
    rows = [[int(t) for t in torch.randint(0, VOCAB, (2 + b,), generator=gen)] for b in range(B)]
    allowed_rows = [[torch.zeros(VOCAB, dtype=torch.bool)] * len(r) for r in rows]
    opt_rows = [[False] * len(r) for r in rows]
    logp_rows = [[0.0] * len(r) for r in rows]
    value_rows = [[0.0] * len(r) for r in rows]
    decoder = Decoder(policy, B)
    decoder.prefill(*pad(rows))
    for step in range(6):
        allowed = phase_masks[step % 3].expand(B, VOCAB)
        s = decoder.sample(allowed, temperature=temperature, generator=gen)
        assert s.values is not None
        decoder.decode_step(s.tokens)
        obs = [[int(t) for t in torch.randint(0, VOCAB, ((step + b) % 3,), generator=gen)] for b in range(B)]
        decoder.extend(*pad(obs, width=3))
        for b in range(B):
            rows[b] += [int(s.tokens[b]), *obs[b]]
            allowed_rows[b] += [allowed[b]] + [torch.zeros(VOCAB, dtype=torch.bool)] * len(obs[b])
            opt_rows[b] += [True] + [False] * len(obs[b])
            logp_rows[b] += [float(s.logprobs[b])] + [0.0] * len(obs[b])
            value_rows[b] += [float(s.values[b])] + [0.0] * len(obs[b])
    tokens, _ = pad(rows)
    T = tokens.shape[1]

    def grid(per_row: Sequence[Sequence[float]], dtype: torch.dtype) -> torch.Tensor:
        out = torch.zeros(B, T, dtype=dtype)
        for b, r in enumerate(per_row):
            out[b, : len(r)] = torch.tensor(r, dtype=dtype)
        return out

    allowed_grid = torch.zeros(B, T, VOCAB, dtype=torch.bool)
    for b, r in enumerate(allowed_rows):
        allowed_grid[b, : len(r)] = torch.stack(r)
    return (
        tokens,
        allowed_grid,
        grid(opt_rows, torch.bool),
        grid(logp_rows, torch.float32),
        grid(value_rows, torch.float32),
    )


def test_sampled_logprobs_and_values_match_the_training_forward() -> None:
    policy = tiny_policy(5)
    tokens, allowed, mask, logp, values = rollout(policy, seed=1, temperature=0.8)
    scores = score_tokens(policy, tokens, allowed, mask, temperature=0.8)
    torch.testing.assert_close(scores.logprobs, logp, atol=1e-4, rtol=1e-4)
    assert scores.values is not None
    torch.testing.assert_close(scores.values, values, atol=1e-4, rtol=1e-4)
    assert bool((scores.entropy[mask] > 0).all()) and bool((scores.entropy[~mask] == 0).all())
    # Env positions whose masks allow nothing must stay finite, or 0 * NaN would poison a loss.
    scores.logprobs.sum().backward()
    assert all(torch.isfinite(p.grad).all() for p in policy.parameters() if p.grad is not None)


def test_score_tokens_rejects_a_counted_token_its_mask_disallows() -> None:
    policy = tiny_policy()
    tokens = torch.tensor([[1, 2, 3]])
    allowed = torch.ones(1, 3, VOCAB, dtype=torch.bool)
    allowed[0, 2, 3] = False
    with pytest.raises(ValueError, match=r"token 3 at \(row 0, position 2\)"):
        score_tokens(policy, tokens, allowed)
    with pytest.raises(ValueError, match=r"mask\[:, 0\] must be 0"):
        score_tokens(policy, tokens, mask=torch.ones(1, 3))


def test_sampling_is_deterministic_under_a_seeded_generator() -> None:
    policy = tiny_policy(6)
    first = rollout(policy, seed=11)
    again = rollout(policy, seed=11)
    other = rollout(policy, seed=12)
    assert torch.equal(first[0], again[0]) and torch.equal(first[3], again[3])
    assert not torch.equal(first[0], other[0])


def test_decoder_bad_input_names_what_is_wrong() -> None:
    decoder = Decoder(tiny_policy(), 2)
    tokens = torch.tensor([[1, 2, 3], [4, 5, 6]])
    with pytest.raises(ValueError, match=r"lengths must lie in \[0, 3\]"):
        decoder.prefill(tokens, torch.tensor([4, 1]))
    with pytest.raises(ValueError, match=r"token ids must lie in \[0, 23\)"):
        decoder.prefill(torch.tensor([[1, VOCAB], [1, 2]]), torch.tensor([2, 2]))
    # An out-of-range id in the padding is fine: padding is never read.
    decoder.prefill(torch.tensor([[1, -7], [1, 2]]), torch.tensor([1, 2]))
    with pytest.raises(ValueError, match=r"int64"):
        decoder.extend(tokens.float(), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="distinct row indices"):
        decoder.reset_rows(torch.tensor([1, 1]), tokens, torch.tensor([1, 1]))
    with pytest.raises(ValueError, match=r"rows must lie in \[0, 2\)"):
        decoder.reset_rows(torch.tensor([2]), tokens[:1], torch.tensor([1]))
    assert decoder.lengths.tolist() == [1, 2]  # failed calls changed nothing
