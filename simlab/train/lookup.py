"""The lookup probe: can the policy network learn to keep the fact its prompt names?

On a prompt-cue KeyRecall task the ``cued`` teacher's one-pair summary is ``key value`` of the fact whose key
the prompt ends with. Writing the key copies a fixed prompt position; writing the value is a lookup by
content (find ``FACT key`` in the context, copy what follows it), the two-layer induction-head pattern. The
probe trains a fresh policy network on the teacher's summaries alone: each row is a demonstration segment cut
after its summary, the loss is the negative log-likelihood of the two summary tokens under the summary phase's
allowed tokens, and the rows are fresh demonstrations (each chunk of episodes used for a few passes, never
seen again). Every ``check_every`` steps it reads, on held-out summaries from the base's check set:

- ``keep``: the chance that a summary sampled at temperature 1 (as the policy writes them in a rollout) is the
  cued pair, ``p(key) * p(value | key)``, averaged over summaries; the probe has learnt the lookup at the first
  check where it reaches ``target``;
- ``greedy``: the share whose greedy summary is the cued pair; ``key`` and ``value``: the share whose greedy
  key, and greedy value after the teacher's key, are right; ``value_fresh`` and ``value_carried`` split
  ``value`` by whether the context holds an earlier summary (the cued pair already: a copy, not a lookup);
- ``attn_l<i>``: in layer ``i``, the attention from the summary's key token (the position that writes the
  value) onto the cued fact's value in the context, the largest over heads, averaged over summaries;
  ``attn_other_l<i>`` the same onto the other facts' values together (a head that reads "a value", not "the
  cued value", scores here); and ``attn_uniform``, the cued value's weight under uniform attention, for scale.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, cast

import numpy as np
import torch
from torch import Tensor

from simlab.config import RunConfig
from simlab.errors import ConfigError
from simlab.harness.phases import phase_table
from simlab.harness.protocol import Phase
from simlab.policy.decode import masked_log_softmax
from simlab.policy.model import Block, Policy
from simlab.tasks import vocab
from simlab.tasks.config import KeyRecallConfig
from simlab.tasks.keyrecall import cue_in_prompt, cue_position
from simlab.train.identity import base_harness, base_task
from simlab.train.quality import check_seed
from simlab.train.rollouts import collect, make_env
from simlab.train.tokens import TokenBatch
from simlab.update import Adam

ProbeResult = tuple[dict[str, Any], list[dict[str, Any]]]
"""A probe's result row and its checks' history (one row per check)."""


@dataclass(frozen=True)
class ProbeSetting:
    """One cell of the probe's grid: the optimiser's learning rate, the network's shape and the seed."""

    lr: float
    d_model: int
    n_layer: int
    seed: int


@dataclass(frozen=True)
class ProbeBudget:
    """How long a probe trains and how it is checked."""

    max_steps: int = 20_000
    batch: int = 64
    """Summaries per optimiser step."""
    check_every: int = 250
    check_summaries: int = 1024
    target: float = 0.9
    """``keep`` at which the probe has learnt the lookup (it stops there)."""
    chunk_episodes: int = 2048
    """Demonstration episodes collected at a time; each chunk's summaries feed ``passes`` passes."""
    passes: int = 2


@dataclass
class Summaries:
    """Demonstration rows cut after their summary: ``tokens`` (N, T) right-padded, the summary's key token at
    ``at`` (N,), the cued fact's value in the context at ``source`` (N,; -1 where the context has none) and
    ``others`` (N, T), True at the values of the other facts the context states."""

    tokens: Tensor
    lengths: Tensor
    at: Tensor
    source: Tensor
    others: Tensor

    @property
    def carried(self) -> Tensor:
        """(N,) whether the context holds an earlier summary (the cued pair, copied rather than looked up)."""
        positions = torch.arange(self.tokens.shape[1])[None, :]
        return ((self.tokens == vocab.SUMMARY) & (positions < self.at[:, None])).any(dim=1)

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    def take(self, rows: Tensor) -> Summaries:
        """The rows ``rows``, cut to the longest of them."""
        width = int(self.lengths[rows].max())
        return Summaries(self.tokens[rows, :width], self.lengths[rows], self.at[rows], self.source[rows],
                         self.others[rows, :width])


def check_probe_config(cfg: RunConfig) -> None:
    """Refuse a config the probe cannot read: it needs the cue in the prompt, the ``cued`` teacher and a
    one-pair summary."""
    task = cfg.task
    if not isinstance(task, KeyRecallConfig) or not cue_in_prompt(task):
        raise ConfigError.invalid("task.cue_at", getattr(task, "cue_at", None),
                                  "the lookup probe needs a KeyRecall task with the cue in the prompt "
                                  "(task.cue_at = 'prompt' and task.cue_reliability set), e.g. keyrecall-cue-clean")
    if cfg.base.teacher != "cued":
        raise ConfigError.invalid("base.teacher", cfg.base.teacher,
                                  "the lookup probe learns the 'cued' teacher's summaries; choose 'cued'")
    if cfg.harness.summary_tokens != 2 or cfg.harness.summary_budget is not None:
        raise ConfigError.invalid("harness.summary_tokens", cfg.harness.summary_tokens,
                                  "the lookup probe reads a fixed one-pair summary; choose 2 (no summary_budget)")


def demonstrations(cfg: RunConfig, episodes: int, seed: int) -> Summaries:
    """The teacher's summaries that keep the cued fact, from ``episodes`` episodes from instance ``seed``."""
    harness = base_harness(cfg)
    rb, _, _ = collect(cfg, None, harness=harness, prompts=episodes, group_size=1, seed=seed,
                       teacher=cfg.base.teacher)
    tb = TokenBatch.from_rollouts(rb, torch.device("cpu"))
    tokens, phase = tb.tokens.numpy(), tb.phase.numpy()
    assert isinstance(cfg.task, KeyRecallConfig)  # check_probe_config
    cue = cue_position(cfg.task)
    rows, ats, sources = [], [], []
    for r in np.flatnonzero((phase == int(Phase.SUMMARY)).any(axis=1)):
        at = int(np.flatnonzero(phase[r] == int(Phase.SUMMARY))[0])
        key, value = tokens[r, at], tokens[r, at + 1]
        if key != tokens[r, cue]:
            continue  # the teacher kept another fact (the cued one not seen yet)
        hits = [j + 1 for j in range(cue + 1, at - 1) if tokens[r, j] == key and tokens[r, j + 1] == value]
        rows.append(r)
        ats.append(at)
        sources.append(hits[-1] if hits else -1)
    index = torch.as_tensor(rows, dtype=torch.long)
    at_t, source = torch.as_tensor(ats, dtype=torch.long), torch.as_tensor(sources, dtype=torch.long)
    width = int(at_t.max()) + 2
    kept = tb.tokens[index, :width].clone()
    stated = torch.zeros_like(kept, dtype=torch.bool)
    stated[:, 2:] = kept[:, :-2] == vocab.FACT  # a value stands two after its FACT
    positions = torch.arange(width)[None, :]
    others = stated & (positions < at_t[:, None]) & (positions != source[:, None])
    return Summaries(kept, at_t + 2, at_t, source, others)


def summary_logprobs(policy: Policy, batch: Summaries, allowed: Tensor) -> tuple[Tensor, Tensor]:
    """(N, 2, V) log-probabilities over the summary phase's tokens at the two summary slots (the key's,
    then the value's after the teacher's key), and the (N, 2) teacher tokens."""
    logits = policy(batch.tokens).logits  # (N, T, V)
    rows = torch.arange(len(batch))
    slots = torch.stack([batch.at - 1, batch.at], dim=1)  # the positions whose outputs predict key, value
    logp = masked_log_softmax(logits[rows[:, None], slots], allowed)
    return logp, batch.tokens[rows[:, None], slots + 1]


def probe_loss(policy: Policy, batch: Summaries, allowed: Tensor) -> Tensor:
    """The mean negative log-likelihood of the teacher's summary tokens."""
    logp, target = summary_logprobs(policy, batch, allowed)
    return -logp.gather(-1, target[..., None]).mean()


@torch.no_grad()
def check(policy: Policy, held: Summaries, allowed: Tensor) -> dict[str, float]:
    """The probe's held-out reading (the module's docstring): keep, greedy, key, value and attention, from one
    forward pass."""
    policy.eval()
    with captured_qkv(policy) as qkv:
        logp, target = summary_logprobs(policy, held, allowed)
    weights = attention_from(qkv, held, policy.config.n_head)
    right = logp.argmax(-1) == target  # (N, 2)
    out = {
        "keep": float(logp.gather(-1, target[..., None]).sum(dim=(1, 2)).exp().mean()),
        "greedy": float(right.all(dim=1).float().mean()),
        "key": float(right[:, 0].float().mean()),
        "value": float(right[:, 1].float().mean()),
        "value_fresh": float(right[~held.carried, 1].float().mean()),
        "value_carried": float(right[held.carried, 1].float().mean()),
        "attn_uniform": float((1.0 / (held.at[held.source >= 0] + 1)).float().mean()),
    }
    for i, (cued, other) in enumerate(weights):
        out.update({f"attn_l{i}": cued, f"attn_other_l{i}": other})
    policy.train()
    return out


@contextlib.contextmanager
def captured_qkv(policy: Policy) -> Iterator[list[Tensor]]:
    """Each layer's fused q, k, v projection (B, T, 3C) from the forward passes run inside the block."""
    captured: list[Tensor] = []
    hooks = [cast(Block, block).attn.qkv.register_forward_hook(lambda _m, _i, out: captured.append(out.detach()))
             for block in policy.blocks]
    try:
        yield captured
    finally:
        for hook in hooks:
            hook.remove()


def attention_to(policy: Policy, batch: Summaries) -> list[tuple[float, float]]:
    """:func:`attention_from` of one forward pass over ``batch``."""
    with captured_qkv(policy) as qkv:
        policy(batch.tokens)
    return attention_from(qkv, batch, policy.config.n_head)


def attention_from(captured: list[Tensor], batch: Summaries, heads: int) -> list[tuple[float, float]]:
    """Per layer: the attention from each summary's key token onto the cued fact's value, and onto the other
    facts' values together, each the largest over heads, averaged over the summaries whose context states the
    cued fact (recomputed from each layer's q and k, ``captured`` by :func:`captured_qkv`)."""
    has = batch.source >= 0
    rows, at, source = torch.arange(len(batch))[has], batch.at[has], batch.source[has]
    out = []
    for qkv in captured:
        C = qkv.shape[-1] // 3
        q = qkv[rows, at, :C].view(-1, heads, C // heads)  # (N, H, D): the query of the key token
        k = qkv[rows, :, C : 2 * C].view(len(rows), -1, heads, C // heads)  # (N, T, H, D)
        scores = torch.einsum("nhd,nthd->nht", q, k) / math.sqrt(C // heads)
        future = torch.arange(k.shape[1])[None, None, :] > at[:, None, None]
        weights = scores.masked_fill(future, float("-inf")).softmax(-1)  # (N, H, T)
        onto = weights[torch.arange(len(rows)), :, source]  # (N, H)
        elsewhere = (weights * batch.others[rows][:, None, :]).sum(-1)  # (N, H)
        out.append((float(onto.max(dim=1).values.mean()), float(elsewhere.max(dim=1).values.mean())))
    return out


def training_batches(cfg: RunConfig, budget: ProbeBudget, seed: int) -> Iterator[Summaries]:
    """Endless full batches of fresh demonstrations: a chunk of ``chunk_episodes`` episodes at a time, each
    chunk shuffled for ``passes`` passes, a pass's remainder dropped."""
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    while True:
        pool = demonstrations(cfg, budget.chunk_episodes, int(rng.integers(0, cfg.train_seed_limit
                                                                           - budget.chunk_episodes)))
        for _ in range(budget.passes):
            order = torch.randperm(len(pool), generator=gen)
            for first in range(0, len(pool) - budget.batch + 1, budget.batch):
                yield pool.take(order[first : first + budget.batch])


def run_probe(cfg: RunConfig, setting: ProbeSetting, budget: ProbeBudget) -> ProbeResult:
    """Train one probe; its result row and its checks' history (one row per check)."""
    start = time.perf_counter()
    torch.manual_seed(setting.seed)
    policy = Policy(cfg.policy.replace(value_head=False, d_model=setting.d_model, n_layer=setting.n_layer))
    opt = Adam(policy.parameters(), setting.lr)
    allowed = summary_allowed(cfg)
    held = demonstrations(cfg, episodes=budget.check_summaries, seed=check_seed(cfg.replace(seed=setting.seed)))
    held = held.take(torch.arange(min(len(held), budget.check_summaries)))
    history: list[dict[str, Any]] = []
    step, reading, diverged = 0, check(policy, held, allowed), False
    history.append({"step": 0, **reading})
    for batch in training_batches(cfg, budget, setting.seed):
        if step >= budget.max_steps or reading["keep"] >= budget.target:
            break
        loss = probe_loss(policy, batch, allowed)
        diverged = not bool(torch.isfinite(loss))
        if diverged:
            break
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
        opt.step()
        step += 1
        if step % budget.check_every == 0 or step == budget.max_steps:
            reading = check(policy, held, allowed)
            history.append({"step": step, "loss": float(loss.detach()), **reading})
    best = max(h["keep"] for h in history)
    row = {**asdict(setting), "learnt": reading["keep"] >= budget.target, "diverged": diverged, "steps": step,
           **reading, "best_keep": best, "held_out": len(held), "max_steps": budget.max_steps,
           "target": budget.target, "seconds": round(time.perf_counter() - start, 1)}
    return row, [{**asdict(setting), **h} for h in history]


def summary_allowed(cfg: RunConfig) -> Tensor:
    """(V,) the tokens a summary may hold under ``cfg``'s task and demonstration harness."""
    env = make_env(cfg, 1, base_task(cfg))
    return torch.from_numpy(phase_table(env, base_harness(cfg).trigger))[int(Phase.SUMMARY)]


def probe_worker(cfg: RunConfig, setting: ProbeSetting, budget: ProbeBudget) -> ProbeResult:
    """:func:`run_probe` in a worker process, at one thread (the probes run side by side)."""
    torch.set_num_threads(1)
    return run_probe(cfg, setting, budget)


def run_grid(cfg: RunConfig, settings: list[ProbeSetting], budget: ProbeBudget, jobs: int,
             done: Any = None) -> list[ProbeResult]:
    """Every setting's probe on ``jobs`` processes; ``done(row, history)`` is called as each one ends (the
    caller writes its results then, so an interrupted grid keeps what finished)."""
    from joblib import Parallel, delayed

    results = []
    runs = Parallel(n_jobs=min(jobs, max(len(settings), 1)), backend="loky", return_as="generator_unordered")(
        delayed(probe_worker)(cfg, s, budget) for s in settings)
    for row, history in runs:
        results.append((row, history))
        if done is not None:
            done(row, history)
    return results
