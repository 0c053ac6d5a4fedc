"""The lookup probe (simlab lookup): its demonstrations, its readings against the model's own attention, that it
learns the copy it can, and its CLI's refusals, outputs and resume."""

from __future__ import annotations

import math

import polars as pl
import pytest
import torch

from simlab.config import resolve
from simlab.errors import ConfigError
from simlab.policy.model import Policy
from simlab.tasks import vocab
from simlab.tasks.keyrecall import cue_position
from simlab.train.lookup import (
    ProbeBudget,
    ProbeSetting,
    attention_to,
    check,
    check_probe_config,
    demonstrations,
    run_probe,
    summary_allowed,
    summary_logprobs,
)

from .test_train import cli

PROBE = {"task": {"preset": "keyrecall-cue-clean"}, "base": {"teacher": "cued", "quality": 1.0}}


@pytest.fixture(scope="module")
def cfg():
    return resolve(PROBE)


@pytest.fixture(scope="module")
def held(cfg):
    return demonstrations(cfg, 48, seed=5)


def test_demonstrations_hold_the_cued_pair_and_where_its_value_was_stated(cfg, held):
    assert len(held) > 48  # about one and a half summaries per episode
    cue = cue_position(cfg.task)
    for r in range(len(held)):
        row, at, src = held.tokens[r], int(held.at[r]), int(held.source[r])
        assert int(held.lengths[r]) == at + 2
        assert row[at] == row[cue]  # the summary's key is the prompt's cue
        assert src >= 0 and row[src] == row[at + 1] and row[src - 1] == row[at]  # ... key value, stated
        others = torch.nonzero(held.others[r]).flatten().tolist()
        assert src not in others and all(row[p - 2] == vocab.FACT and p < at for p in others)


def test_keep_is_the_chance_of_sampling_the_cued_pair(cfg, held):
    torch.manual_seed(0)
    policy = Policy(cfg.policy.replace(value_head=False))
    allowed = summary_allowed(cfg)
    reading = check(policy, held, allowed)
    with torch.no_grad():
        logp, target = summary_logprobs(policy, held, allowed)
    p = logp.exp()
    assert torch.allclose(p.sum(-1), torch.ones(len(held), 2))  # a distribution over the summary's tokens
    by_hand = sum(float(p[r, 0, target[r, 0]] * p[r, 1, target[r, 1]]) for r in range(len(held))) / len(held)
    assert math.isclose(reading["keep"], by_hand, rel_tol=1e-5)
    assert 0 <= reading["greedy"] <= min(reading["key"], reading["value"])
    carried = held.carried
    assert 0 < int(carried.sum()) < len(held)  # second compactions hold the first summary
    assert carried[0] == bool((held.tokens[0, : int(held.at[0])] == vocab.SUMMARY).any())
    n = len(held)
    split = (reading["value_fresh"] * int((~carried).sum()) + reading["value_carried"] * int(carried.sum())) / n
    assert math.isclose(split, reading["value"], rel_tol=1e-6)


def test_attention_reading_reproduces_the_models_own_attention_output(cfg, held):
    """The weights attention_to recomputes from q and k, applied to v, give what the model's attention fed
    its output projection at the key token: so they are the weights the model used."""
    torch.manual_seed(1)
    policy = Policy(cfg.policy.replace(value_head=False)).eval()
    qkv, mixed = [], []
    for block in policy.blocks:
        block.attn.qkv.register_forward_hook(lambda _m, _i, out: qkv.append(out.detach()))
        block.attn.proj.register_forward_hook(lambda _m, inp, _o: mixed.append(inp[0].detach()))
    with torch.no_grad():
        policy(held.tokens)
    r, at, src = 0, int(held.at[0]), int(held.source[0])
    C, H = cfg.policy.d_model, cfg.policy.n_head
    for layer in range(cfg.policy.n_layer):
        q = qkv[layer][r, at, :C].view(H, -1)
        k = qkv[layer][r, : at + 1, C : 2 * C].view(at + 1, H, -1)
        v = qkv[layer][r, : at + 1, 2 * C :].view(at + 1, H, -1)
        w = torch.einsum("hd,thd->ht", q, k).div(math.sqrt(C // H)).softmax(-1)
        assert torch.allclose(torch.einsum("ht,thd->hd", w, v).reshape(C), mixed[layer][r, at], atol=1e-5)
    for block in policy.blocks:
        block.attn.qkv._forward_hooks.clear()
        block.attn.proj._forward_hooks.clear()
    one = held.take(torch.tensor([0]))
    for layer, (cued, _) in enumerate(attention_to(policy, one)):
        q = qkv[layer][r, at, :C].view(H, -1)
        k = qkv[layer][r, : at + 1, C : 2 * C].view(at + 1, H, -1)
        w = torch.einsum("hd,thd->ht", q, k).div(math.sqrt(C // H)).softmax(-1)
        assert math.isclose(cued, float(w[:, src].max()), rel_tol=1e-5)


def test_a_short_probe_learns_to_copy_the_prompts_key(cfg):
    row, history = run_probe(cfg, ProbeSetting(3e-3, 32, 1, 0), ProbeBudget(max_steps=120, check_every=60,
                                                                          check_summaries=128, chunk_episodes=256))
    assert [h["step"] for h in history] == [0, 60, 120] and row["steps"] == 120 and not row["learnt"]
    assert history[0]["key"] < 0.2 and row["key"] > 0.9  # copying a fixed prompt position is easy
    assert row["held_out"] == 128 and row["keep"] == history[-1]["keep"]


def test_probe_refuses_a_task_it_cannot_read():
    with pytest.raises(ConfigError, match=r"task\.cue_at"):
        check_probe_config(resolve({"task": {"preset": "keyrecall-mark"}, "base": {"teacher": "cued"}}))
    with pytest.raises(ConfigError, match=r"base\.teacher"):
        check_probe_config(resolve({"task": {"preset": "keyrecall-cue-clean"}}))


@pytest.mark.parametrize(("flag", "value", "key"), [("--lr", "0,1e-3", "--lr"), ("--width", "30", "--width"),
                                                    ("--layers", "two", "--layers"), ("--seeds", "3-1", "--seeds"),
                                                    ("--target", "1.5", "--target")])
def test_cli_lookup_refuses_bad_input_before_anything_runs(tmp_path, flag, value, key):
    out = cli("lookup", flag, value, "--out", str(tmp_path))
    shown = value if flag == "--target" else repr(value)  # a number is shown as the number it was read as
    assert out.returncode == 2 and f"`{key}={shown}` is invalid" in out.stderr, out.stderr
    assert list(tmp_path.iterdir()) == []


def test_cli_lookup_writes_its_tables_and_resumes(tmp_path):
    args = ("lookup", "--lr", "3e-3", "--width", "32", "--layers", "1", "--max-steps", "20", "--check-every", "10")
    first = cli(*args, "--seeds", "0", "--out", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "| 0.003 | 32    | 1      | 0 of 1" in first.stdout and "no setting" in first.stdout
    again = cli(*args, "--seeds", "0,1", "--out", str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert "1 of 2 probes already in" in again.stdout
    runs = pl.read_csv(tmp_path / "lookup-runs.csv")
    assert sorted(runs["seed"].to_list()) == [0, 1] and set(runs["steps"]) == {20}
    assert pl.read_csv(tmp_path / "lookup-history.csv").height == 6  # steps 0, 10, 20 per probe
