"""Same-seed regression pins for the harness: the full ``RolloutBatch`` of many runs, as hashes.

Each case runs ``run_rollouts`` once and hashes everything it produced and everything it did:
- the ``SegmentBatch`` (every field), every ``SegmentTokens`` (tokens, masks, phases, log-probs,
  values), every ``RolloutRecord`` field, the config and the ``v_sum`` version;
- the order of the calls the loop made: every env ``reset`` and ``step`` (the actions), every agent
  ``generate`` request (phase, rows, segment ids, each context, the allowed mask) and every
  ``progress`` call, interleaved as they happened.

The cases cover the reference agents (oracle, scripted at q = 0.7, random) and a small untrained
policy (log-probs and values), every trigger, the discard rule on and off, tails, the caps S and H and
the window reached, env truncation, a frozen summariser (a reference agent by name, an agent object,
a frozen policy) and no summariser, presets of KeyRecall, PointerChase and PeekRead, GRPO groups, and
a SyncVectorEnv over the single env. Timings are not hashed.

A change that moves a hash changes what a seed computes. That is allowed only on purpose: re-record
(``python -m tests.harness.test_rollout_pins``) and say why in the commit. Floats the policy computes
are hashed rounded to 1e-6, so thread-count noise in the last bits of a matmul does not count.
"""

from __future__ import annotations

import dataclasses
import hashlib
import sys
from collections import Counter
from typing import Any

import gymnasium
import numpy as np
import pytest
import torch

from simlab import tasks  # noqa: F401  (registers the envs)
from simlab.harness import HarnessConfig, RolloutBatch, make_agent, run_rollouts
from simlab.harness.protocol import Agent, Generation, Request
from simlab.policy import Policy, PolicyConfig
from simlab.policy.agent import PolicyAgent
from simlab.tasks.presets import PRESETS

KR, PC, PR = "simlab/KeyRecall-v0", "simlab/PointerChase-v0", "simlab/PeekRead-v0"
HEAVY = {"tail_prob": 0.2, "tail_tokens": 30, "horizon": (16, 24)}


@dataclasses.dataclass(frozen=True)
class Case:
    env_id: str = KR
    preset: str | None = "keyrecall-tiny"
    """Task config and base harness settings come from this preset (None: the task's defaults)."""
    task: dict[str, Any] = dataclasses.field(default_factory=dict)
    harness: dict[str, Any] = dataclasses.field(default_factory=dict)
    agent: str = "oracle"
    """A reference agent's name, or 'policy' (a small untrained PolicyAgent)."""
    summariser: str | None = None
    """An agent passed as ``summariser=``: a reference agent's name or 'policy' (a frozen policy)."""
    by_name: bool = False
    """Pass the agent to ``run_rollouts`` by name (unrecorded) instead of as a recorded object."""
    n: int = 16
    group_size: int = 1
    seed: int = 0
    quality: float = 0.7
    truncate_after: int | None = None
    """Every third env is truncated from this env step on."""
    sync: bool = False
    """Wrap the single env in a SyncVectorEnv instead of the native vector env."""
    expect: frozenset[str] = frozenset()
    """Overlong reasons the case must produce (so it keeps exercising the path it is here for)."""


CASES: dict[str, Case] = {
    "oracle-threshold-discard": Case(expect=frozenset({""})),
    "scripted-threshold-keep-k2": Case(agent="scripted", harness={"discard": False, "tail_steps": 2}),
    "random-threshold": Case(agent="random"),
    "scripted-budget": Case(agent="scripted", harness={"trigger": "budget", "t_comp": 30}),
    "random-budget-nodiscard": Case(agent="random", harness={"trigger": "budget", "t_comp": 30, "discard": False}),
    "scripted-policy": Case(agent="scripted", harness={"trigger": "policy", "frac": 0.85}),
    "random-policy-S2": Case(agent="random", harness={"trigger": "policy", "max_compactions": 2},
                             expect=frozenset({"compactions"})),
    "oracle-none": Case(harness={"trigger": "none"}, expect=frozenset({"window"})),
    "scripted-sliding": Case(env_id=PC, preset="pointerchase-tiny", agent="scripted",
                             harness={"trigger": "sliding"}),
    "scripted-chunked": Case(agent="scripted", harness={"trigger": "chunked", "chunk_steps": 3, "tail_steps": 2}),
    "oracle-every-step-k0": Case(env_id=PC, preset="pointerchase-tiny",
                                 harness={"trigger": "every_step", "tail_steps": 0, "max_compactions": 64}),
    "scripted-cap-S": Case(agent="scripted", harness={"max_compactions": 1}, expect=frozenset({"compactions"})),
    "oracle-cap-H": Case(harness={"max_steps": 12}, expect=frozenset({"steps"})),
    "heavy-discard": Case(preset="keyrecall-heavy", task=HEAVY, agent="scripted",
                          harness={"frac": 0.6, "tail_steps": 1, "max_compactions": 20}),
    "heavy-nodiscard-k3": Case(preset="keyrecall-heavy", task=HEAVY, agent="scripted",
                               harness={"frac": 0.85, "discard": False, "tail_steps": 3, "max_compactions": 20}),
    "heavy-budget-k4": Case(preset="keyrecall-heavy", task=HEAVY, agent="oracle",
                            harness={"trigger": "budget", "t_comp": 52, "tail_steps": 4, "max_compactions": 20}),
    "peekread-groups": Case(env_id=PR, preset="peekread-pos", agent="scripted", n=24, group_size=4),
    "keyrecall-mini-oracle": Case(preset="keyrecall-mini", n=24, group_size=2, seed=5),
    "pointerchase-long-random": Case(env_id=PC, preset="pointerchase-long", agent="random"),
    "frozen-oracle-by-config": Case(agent="scripted", harness={"summariser": "oracle"}),
    "frozen-oracle-object": Case(agent="random", summariser="oracle"),
    "no-summariser": Case(agent="scripted", harness={"summariser": "none"}),
    "policy-self": Case(preset="keyrecall-mini", agent="policy", harness={"trigger": "policy"}),
    "policy-frozen-policy": Case(preset="keyrecall-mini", agent="policy", summariser="policy"),
    "policy-budget-k2": Case(preset="keyrecall-mini", agent="policy",
                             harness={"window": 64, "trigger": "budget", "t_comp": 10, "tail_steps": 2}),
    "truncated": Case(agent="scripted", truncate_after=9, expect=frozenset({"truncated"})),
    "by-name-scripted": Case(agent="scripted", by_name=True, quality=0.4),
    "sync-random": Case(env_id=PC, preset=None, agent="random", sync=True,
                        harness={"window": 96, "summary_tokens": 4, "max_compactions": 6, "max_steps": 40}),
}


class _Env:
    """A vector env that logs ``reset`` and ``step`` calls, and can truncate every third env."""

    def __init__(self, env: Any, log: list[Any], truncate_after: int | None) -> None:
        self._env, self._log, self._truncate_after, self._t = env, log, truncate_after, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        self._log.append(("reset", seed))
        return self._env.reset(seed=seed, options=options)

    def step(self, actions: Any) -> Any:
        self._log.append(("step", np.array(actions, copy=True)))
        obs, reward, terminated, truncated, info = self._env.step(actions)
        self._t += 1
        if self._truncate_after is not None and self._t >= self._truncate_after:
            truncated = np.array(truncated, copy=True)
            truncated[::3] = True
        return obs, reward, terminated, truncated, info


class _Agent:
    """An agent that logs every request before passing it on."""

    def __init__(self, inner: Agent, log: list[Any], tag: str) -> None:
        self.inner, self.log, self.tag = inner, log, tag

    def generate(self, request: Request) -> Generation:
        self.log.append((
            "generate", self.tag, int(request.phase), request.num_tokens, request.window,
            request.env_ids, request.segment_ids, request.contexts, request.allowed, request.env is not None,
        ))
        return self.inner.generate(request)


def _policy_agent(env: Any, window: int, seed: int) -> PolicyAgent:
    torch.manual_seed(seed)
    cfg = PolicyConfig(vocab_size=int(env.single_action_space.n), n_layer=1, n_head=2, d_model=16,
                       max_len=window + 16)
    return PolicyAgent(Policy(cfg).eval(), int(env.num_envs), generator=torch.Generator().manual_seed(seed))


def play(case: Case) -> tuple[RolloutBatch, list[Any]]:
    """Run one case; returns its batch and the log of calls."""
    preset = PRESETS[case.preset] if case.preset else None
    task_cfg = preset.task if preset else None
    if task_cfg is not None and case.task:
        task_cfg = dataclasses.replace(task_cfg, **case.task)
    kwargs: dict[str, Any] = {} if task_cfg is None else {"config": task_cfg}
    if case.sync:
        kwargs["vectorization_mode"] = "sync"
    cfg = HarnessConfig(**{**(preset.harness if preset else {}), **case.harness})
    log: list[Any] = []
    env = _Env(gymnasium.make_vec(case.env_id, num_envs=case.n, **kwargs), log, case.truncate_after)

    def build(name: str, seed: int, tag: str) -> Agent:
        inner = (_policy_agent(env, cfg.window, seed) if name == "policy"
                 else make_agent(name, env, seed=seed, quality=case.quality))
        return _Agent(inner, log, tag)

    agent: Agent | str = case.agent if case.by_name else build(case.agent, case.seed, "agent")
    summariser = None if case.summariser is None else build(case.summariser, case.seed + 1, "summariser")
    rb = run_rollouts(env, agent, cfg, seed=case.seed, group_size=case.group_size, summariser=summariser,
                      quality=case.quality, progress=lambda k: log.append(("progress", k)))
    return rb, log


def _feed(h: Any, obj: Any) -> None:
    """Hash ``obj`` canonically: arrays by dtype, shape and values (floats rounded, NaN as a flag)."""
    if isinstance(obj, np.ndarray):
        arr = obj
        h.update(f"a{arr.dtype.str}{arr.shape}".encode())
        if arr.dtype.kind == "f":
            nan = np.isnan(arr)
            h.update(nan.tobytes())
            arr = np.round(np.where(nan, 0.0, arr), 6) + 0.0  # + 0.0: -0.0 and 0.0 hash alike
        h.update(np.ascontiguousarray(arr).tobytes())
    elif isinstance(obj, (list, tuple)):
        h.update(f"l{len(obj)}".encode())
        for x in obj:
            _feed(h, x)
    elif isinstance(obj, dict):
        _feed(h, sorted(obj.items()))
    elif dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        h.update(type(obj).__name__.encode())
        _feed(h, [(f.name, getattr(obj, f.name)) for f in dataclasses.fields(obj)])
    elif isinstance(obj, float):
        _feed(h, np.asarray([obj], dtype=np.float64))
    else:
        h.update(f"{type(obj).__name__}:{obj!r}".encode())


TIMINGS = ("env_seconds", "agent_seconds", "total_seconds")
"""The fields of ``RolloutBatch`` left out of the hash."""


def fingerprint(rb: RolloutBatch, log: list[Any]) -> tuple[str, tuple[Any, ...]]:
    """Hashes of the batch, its segments, its records, the rest and the call log; then a few readable
    totals (segments, summed reward, compactions, tokens, calls) to debug a mismatch with."""
    hashes = []
    for part in (rb.batch, rb.segments, rb.rollouts, [rb.config, rb.v_sum_version], log):
        h = hashlib.sha256()
        _feed(h, part)
        hashes.append(h.hexdigest()[:12])
    totals = (len(rb.segments), sum(r.reward for r in rb.rollouts), sum(r.compactions for r in rb.rollouts),
              sum(r.tokens for r in rb.rollouts), len(log))
    return " ".join(hashes), totals


PINNED: dict[str, tuple[str, tuple[Any, ...]]] = {
    "by-name-scripted": ("d92fe230bdcb db846158d8a7 233aed4c4e23 e0dfd36b6f65 8bd6c3e770c4",
                         (56, 10.0, 40, 3360, 42)),
    "frozen-oracle-by-config": ("9e63888299e5 405d8fb58479 f8ebda6583d1 ffd3395e7ca7 7fbf342d6531",
                                (56, 16.0, 40, 3360, 73)),
    "frozen-oracle-object": ("f77c9c058536 c7c2a2844fb5 7eb66c0cbc4a e0dfd36b6f65 d6a7ebe886cc",
                             (56, 1.0, 40, 3360, 83)),
    "heavy-budget-k4": ("148381fd7486 29a997ac54ba 3fc927bd1002 c3c6a3cc61e4 c897129b1a17",
                        (157, 16.0, 141, 5717, 95)),
    "heavy-discard": ("aa0c8af09b2f 09b5cd33b9a5 295184fe2020 b555c9e87fc4 45edc317424d",
                      (83, 11.0, 67, 5125, 92)),
    "heavy-nodiscard-k3": ("e3cf1ef7cba9 5717295aa116 f97b3dc897c2 14a23c917b82 2759de51906b",
                           (36, 5.0, 20, 3173, 82)),
    "keyrecall-mini-oracle": ("786264baead0 7e72dc46843f 48c2f3749b90 6c968126579d 089530facc36",
                              (100, 24.0, 76, 1880, 57)),
    "no-summariser": ("e7ecd2677d59 2404a5637cf3 e4df98b393e2 0994d5583a01 7bc3110e444a",
                      (50, 1.0, 34, 3040, 73)),
    "oracle-cap-H": ("7c8562a08d34 3af0b2df5618 0f1f29a79169 9006409e9e32 739511f87331",
                     (32, 0.0, 16, 1862, 44)),
    "oracle-every-step-k0": ("1e732cb8b658 bf94455fdde0 d3fbb6a99ef2 f2eca4d8be30 bc65bb93a01d",
                             (331, 15.0, 315, 5909, 96)),
    "oracle-none": ("0af0d90a1030 69d5343dd0b5 b27d2998b3e9 44b072795905 59230341c785",
                    (16, 0.0, 0, 1535, 41)),
    "oracle-threshold-discard": ("b359debd7e09 4e9e82372228 ab9263c12c28 e0dfd36b6f65 b83720b2f7cf",
                                 (56, 16.0, 40, 3360, 83)),
    "peekread-groups": ("315e4212b203 b4a6221f9c18 fbd10e2cb588 bd23f29cfade ccb7ca2eaa1f",
                        (44, 11.0, 20, 1595, 42)),
    "pointerchase-long-random": ("392dd8a42e7d 01bca64f44e7 efac04dd2a94 a576e81338a9 7885c0b177a2",
                                 (101, 0.0, 85, 8529, 140)),
    "policy-budget-k2": ("62e21b0a1985 110816e033f0 25850992e527 c970cf2ad312 16cd0a25c450",
                         (32, 3.0, 16, 1123, 42)),
    "policy-frozen-policy": ("9e54a46c5829 11145bc5eb77 2837a8283ff1 6c968126579d b07354ba4bb2",
                             (69, 4.0, 53, 1271, 49)),
    "policy-self": ("e36203ce5d72 24603611e775 f6d3c17f754e 8fad7f521588 0d74e240d364",
                    (102, 4.0, 86, 1493, 76)),
    "random-budget-nodiscard": ("1a83853cf87f df7ba1f4b115 ba7cede433bc 6989dec8dcad 6899eb608ca3",
                                (62, 1.0, 46, 3408, 86)),
    "random-policy-S2": ("f33ff324566b e396d05bc792 79f38ff40681 85a8740f095b d18d15a8649d",
                         (48, 0.0, 32, 2902, 96)),
    "random-threshold": ("a95afa8a8924 6e2e4091e212 f4a6780e57fb e0dfd36b6f65 93a8b1c63d6a",
                         (56, 1.0, 40, 3360, 83)),
    "scripted-budget": ("8d099650f516 065094b8278d 232dd06b37b2 10be50da939a be76b36d02cd",
                        (62, 10.0, 46, 3408, 86)),
    "scripted-cap-S": ("15f94a4c04c0 8e666923cb53 adb29b551f30 364607fdf9d5 8a57888e41fa",
                       (32, 0.0, 16, 2362, 54)),
    "scripted-chunked": ("b55bdd3150af dc41aa05f9c7 db86bb246f57 c02e6ca1e77a 5ae7066e821d",
                         (107, 6.0, 91, 3592, 69)),
    "scripted-policy": ("dc67885a4beb a0b0223f1293 df972611dbb9 cb28c86eb061 9a3aa8d54c99",
                        (54, 12.0, 38, 3400, 104)),
    "scripted-sliding": ("f56dff69f431 b5608c8a8a15 25837160a50f a80e3b7813e7 2031b266c5f4",
                         (266, 1.0, 250, 4019, 73)),
    "scripted-threshold-keep-k2": ("2f18f617073c 803bfc41db29 df37ad17f29c 01ec7797d0e4 ad905e69bcfb",
                                   (59, 11.0, 43, 3384, 84)),
    "sync-random": ("d006f36d0c20 f9b860b40e29 4b2cf42dde9b 3914dcac3e21 c3c935e6e118",
                    (73, 0.0, 57, 4361, 80)),
    "truncated": ("f2ed4e78a245 2fdb17cacd32 19feeb8d2434 e0dfd36b6f65 6054e41e9987",
                  (44, 6.0, 28, 2614, 83)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_seed_gives_the_same_rollout_batch(name: str) -> None:
    rb, log = play(CASES[name])
    got = fingerprint(rb, log)
    assert got == PINNED[name], f"{name}: the harness's output changed for a fixed seed; see the module docstring"
    reasons = Counter(r.overlong for r in rb.rollouts)
    assert CASES[name].expect <= set(reasons), f"{name} no longer reaches {CASES[name].expect}: {reasons}"


def test_every_case_is_pinned_and_timings_are_left_out() -> None:
    assert set(PINNED) == set(CASES)
    hashed = {"batch", "segments", "rollouts", "config", "v_sum_version"}
    assert {f.name for f in dataclasses.fields(RolloutBatch)} - hashed == set(TIMINGS)


if __name__ == "__main__":  # re-record: python -m tests.harness.test_rollout_pins
    print("PINNED: dict[str, tuple[str, tuple[Any, ...]]] = {")
    for key in sorted(CASES):
        batch, calls = play(CASES[key])
        hashes, totals = fingerprint(batch, calls)
        print(f'    "{key}": ("{hashes}",\n    {" " * len(key)}     {totals}),')
        print(f"  {key}: {Counter(r.overlong for r in batch.rollouts)}", file=sys.stderr)
    print("}")
