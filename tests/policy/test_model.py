"""The network itself: config validation, the two attention paths, gradients, the critic copy."""

from __future__ import annotations

import pytest
import torch

from simlab.errors import ConfigError
from simlab.policy import Policy, PolicyConfig, critic_from
from tests.policy.conftest import VOCAB, tiny_policy


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        (
            {"d_model": 96, "n_head": 5},
            "`policy.n_head=5` is invalid; d_model=96 must be divisible by n_head",
        ),
        ({"vocab_size": 1}, "`policy.vocab_size=1` is invalid"),
        ({"n_layer": 0}, "`policy.n_layer=0` is invalid"),
        ({"max_len": 2.5}, "`policy.max_len=2.5` is invalid"),
        ({"d_model": True}, "`policy.d_model=True` is invalid"),
        ({"dropout": 1.0}, "`policy.dropout=1.0` is invalid; choose a value in [0, 1)"),
        ({"value_head": "yes"}, "`policy.value_head='yes'` is invalid; choose true or false"),
    ],
)
def test_config_errors_name_key_and_value(overrides: dict[str, object], needle: str) -> None:
    fields = {"vocab_size": 10, "n_layer": 1, "n_head": 2, "d_model": 8, "max_len": 16, **overrides}
    with pytest.raises(ConfigError) as err:
        PolicyConfig(**fields)  # type: ignore[arg-type]
    assert needle in str(err.value)


def test_forward_shapes_and_padding_never_leaks_into_valid_positions() -> None:
    policy = tiny_policy()
    tokens = torch.randint(0, VOCAB, (3, 12))
    out = policy(tokens)
    assert out.logits.shape == (3, 12, VOCAB) and out.values is not None and out.values.shape == (3, 12)
    # Right padding: changing tokens after position 7 must not move outputs at positions <= 7.
    other = tokens.clone()
    other[:, 8:] = torch.randint(0, VOCAB, (3, 4))
    out2 = policy(other)
    torch.testing.assert_close(out.logits[:, :8], out2.logits[:, :8])
    with pytest.raises(ValueError, match="max_len=48"):
        policy(torch.zeros(1, 49, dtype=torch.long))


def test_plain_attention_path_matches_fused() -> None:
    fused = tiny_policy(seed=3)
    plain = tiny_policy(seed=3, fused_attention=False)
    tokens = torch.randint(0, VOCAB, (2, 20))
    torch.testing.assert_close(plain(tokens).logits, fused(tokens).logits, atol=1e-5, rtol=1e-5)


def test_gradient_reaches_lm_head_value_head_and_embeddings() -> None:
    policy = tiny_policy(sharp=False).train()
    tokens = torch.randint(0, VOCAB, (2, 10))
    out = policy(tokens)
    assert out.values is not None
    loss = out.logits.logsumexp(-1).mean() + out.values.pow(2).mean()
    loss.backward()
    grads = {name: p.grad for name, p in policy.named_parameters()}
    for name in ("wte.weight", "wpe.weight", "value.weight", "value.bias", "blocks.0.attn.qkv.weight"):
        grad = grads[name]
        assert grad is not None and grad.abs().sum() > 0, name
    # The LM head is tied to wte; check that the tie holds (a separate head would need its own grad).
    assert policy.lm_head.weight is policy.wte.weight


def test_no_value_head_gives_none() -> None:
    policy = tiny_policy(value_head=False)
    assert policy(torch.zeros(1, 3, dtype=torch.long)).values is None


@pytest.mark.parametrize("value_head", [True, False])
def test_critic_from_policy_copies_weights_and_owns_them(value_head: bool) -> None:
    policy = tiny_policy(value_head=value_head)
    critic = critic_from(policy)
    assert isinstance(critic, Policy) and critic.value is not None
    tokens = torch.randint(0, VOCAB, (2, 9))
    torch.testing.assert_close(critic(tokens).logits, policy(tokens).logits)
    if value_head:
        torch.testing.assert_close(critic(tokens).values, policy(tokens).values)
    shared = {id(p) for p in policy.parameters()} & {id(p) for p in critic.parameters()}
    assert not shared
