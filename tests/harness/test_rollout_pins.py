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
(``python -m tests.harness.test_rollout_pins``) and say why in the commit. Floats are kept out of the
hashes (their dtype, shape and NaN pattern are hashed) and pinned as two checksums compared to a relative
1e-6: a plain sum and a position-weighted one, so that a value that moved or two that swapped places
count, while last-bit noise of a matmul (another CPU's kernels, another thread count) does not. Hashing
floats rounded to 1e-6, as the pins first did, broke on another machine whenever a log-prob sat on a
rounding boundary.
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
from pydantic import BaseModel

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
        task_cfg = task_cfg.replace(**case.task)
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


def _feed(h: Any, obj: Any, floats: list[np.ndarray]) -> None:
    """Hash ``obj`` canonically: arrays by dtype, shape and values; float values (NaN as 0, its place
    hashed as a flag) go to ``floats`` instead, in the order met."""
    if isinstance(obj, np.ndarray):
        arr = obj
        h.update(f"a{arr.dtype.str}{arr.shape}".encode())
        if arr.dtype.kind == "f":
            nan = np.isnan(arr)
            h.update(nan.tobytes())
            floats.append(np.where(nan, 0.0, arr).astype(np.float64).ravel())
        else:
            h.update(np.ascontiguousarray(arr).tobytes())
    elif isinstance(obj, (list, tuple)):
        h.update(f"l{len(obj)}".encode())
        for x in obj:
            _feed(h, x, floats)
    elif isinstance(obj, dict):
        _feed(h, sorted(obj.items()), floats)
    elif isinstance(obj, BaseModel) or (dataclasses.is_dataclass(obj) and not isinstance(obj, type)):
        h.update(type(obj).__name__.encode())  # a config section (a model) is fed as its fields, like a dataclass
        names = type(obj).model_fields if isinstance(obj, BaseModel) else [f.name for f in dataclasses.fields(obj)]
        _feed(h, [(name, getattr(obj, name)) for name in names], floats)
    elif isinstance(obj, float):
        _feed(h, np.asarray([obj], dtype=np.float64), floats)
    else:
        h.update(f"{type(obj).__name__}:{obj!r}".encode())


def checksums(floats: list[np.ndarray]) -> tuple[float, float]:
    """A plain sum of every float met and a sum weighted by position (weights 1 to 2, period 97)."""
    x = np.concatenate(floats) if floats else np.zeros(0)
    w = 1.0 + (np.arange(x.size) % 97) / 97.0
    return round(float(x.sum()), 9), round(float(x @ w), 9)


TIMINGS = ("env_seconds", "agent_seconds", "total_seconds")
"""The fields of ``RolloutBatch`` left out of the hash."""


def fingerprint(rb: RolloutBatch, log: list[Any]) -> tuple[str, tuple[Any, ...], tuple[float, float]]:
    """Hashes of the batch, its segments, its records, the rest and the call log; a few readable totals
    (segments, summed reward, compactions, tokens, calls) to debug a mismatch with; the float checksums."""
    hashes, floats = [], []
    for part in (rb.batch, rb.segments, rb.rollouts, [rb.config, rb.v_sum_version], log):
        h = hashlib.sha256()
        _feed(h, part, floats)
        hashes.append(h.hexdigest()[:12])
    totals = (len(rb.segments), sum(r.reward for r in rb.rollouts), sum(r.compactions for r in rb.rollouts),
              sum(r.tokens for r in rb.rollouts), len(log))
    return " ".join(hashes), totals, checksums(floats)


PINNED: dict[str, tuple[str, tuple[Any, ...], tuple[float, float]]] = {
    "by-name-scripted": ("ec2393370198 2f38bcc0b08b c373088b4329 3d4283ac1473 8bd6c3e770c4",
                         (56, 10.0, 40, 3360, 42), (20.8, 30.053608247)),
    "frozen-oracle-by-config": ("8cf6c050a919 bbed84bdd86e f623144aefc0 ef827bddd360 7fbf342d6531",
                                (56, 16.0, 40, 3360, 73), (32.8, 46.837113402)),
    "frozen-oracle-object": ("8cf6c050a919 888434bcae68 f623144aefc0 3d4283ac1473 d6a7ebe886cc",
                             (56, 1.0, 40, 3360, 83), (2.8, 4.445360825)),
    "heavy-budget-k4": ("49f9252284b0 2ed94d38ba23 ba640212591a 43c3f889f06f 004f6e193e0c",
                        (164, 16.0, 148, 5773, 95), (32.75, 45.018041237)),
    "heavy-discard": ("3a83eed320bf 432d8262ad37 07fda4f9bb13 52c94437360e 45edc317424d",
                      (83, 11.0, 67, 5125, 92), (22.6, 32.113402062)),
    "heavy-nodiscard-k3": ("841ec5d4f7c5 2189a6f61299 d2c02f5b38ff 747105452c37 2759de51906b",
                           (36, 5.0, 20, 3173, 82), (10.85, 16.644329897)),
    "keyrecall-mini-oracle": ("6de681c7a88c a53c3c3eb48a f0abfdc7c11b a7accaa88711 089530facc36",
                              (100, 24.0, 76, 1880, 57), (48.8, 62.131958763)),
    "no-summariser": ("69f3799ecc1d b9310bc8f65b c424f3b33ec9 d47949098d93 7bc3110e444a",
                      (50, 1.0, 34, 3040, 73), (2.8, 3.109278351)),
    "oracle-cap-H": ("efdf94ae23d5 9890cace8016 377e30f4aa5e b100373170df 739511f87331",
                     (32, 0.0, 16, 1862, 44), (0.8, 0.808247423)),
    "oracle-every-step-k0": ("710f457481c2 4850f6b25c37 1d20b30f18cf b88d1e093f16 bc65bb93a01d",
                             (331, 15.0, 315, 5909, 96), (30.8, 40.694845361)),
    "oracle-none": ("f625f1346b2b ab565c7c4acb 1605ff97cf7a 1615ed402728 59230341c785",
                    (16, 0.0, 0, 1535, 41), (0.8, 1.575257732)),
    "oracle-threshold-discard": ("ec2393370198 14ef7fb1c7eb d3847ec46511 3d4283ac1473 b83720b2f7cf",
                                 (56, 16.0, 40, 3360, 83), (32.8, 46.837113402)),
    "peekread-groups": ("8ce61a925b0d 53b627812432 dd2469844e0a e102f18d5c00 ccb7ca2eaa1f",
                        (44, 11.0, 20, 1595, 42), (22.8, 27.806185567)),
    "pointerchase-long-random": ("9f14932761cd 5cf56178f639 89a5653269b5 b66712602ab6 7885c0b177a2",
                                 (101, 0.0, 85, 8529, 140), (0.8, 1.35257732)),
    "policy-budget-k2": ("56b59c9f191c 74ac60189c7e 5070cda53172 cbab94520c94 16cd0a25c450",
                         (32, 3.0, 16, 1123, 42), (-78.48831785, -117.872647125)),
    "policy-frozen-policy": ("301e9c828d4e c76d9c781f9f 000556514c0f a7accaa88711 b07354ba4bb2",
                             (69, 4.0, 53, 1271, 49), (-19.822362835, -30.97513)),
    "policy-self": ("d28d49fd4348 14f6af438317 4860e02f6286 fa985c3a27bd 0d74e240d364",
                    (102, 4.0, 86, 1493, 76), (-437.97197452, -659.937672187)),
    "random-budget-nodiscard": ("60fb6f0dd6bc d7e92adb481a d4bade40675a 415667863c1b 6899eb608ca3",
                                (62, 1.0, 46, 3408, 86), (2.8, 4.422680412)),
    "random-policy-S2": ("2928d4c58028 b99d85c43fd4 1907f0ded17e b02e5cc11273 d18d15a8649d",
                         (48, 0.0, 32, 2902, 96), (0.8, 1.542268041)),
    "random-threshold": ("ec2393370198 946d04d9ba82 f1718abf13a9 3d4283ac1473 93a8b1c63d6a",
                         (56, 1.0, 40, 3360, 83), (2.8, 4.218556701)),
    "scripted-budget": ("d788b78b85f4 dc011da927eb ffab1af5aefe d6195c3f42ea be76b36d02cd",
                        (62, 10.0, 46, 3408, 86), (20.8, 27.435051546)),
    "scripted-cap-S": ("2c96730225d1 6df21038884b c2790d97087b 6c18dd7f36c0 8a57888e41fa",
                       (32, 0.0, 16, 2362, 54), (0.8, 1.055670103)),
    "scripted-chunked": ("a6b007e4edf3 e69c5615b1fb 9c430cc3a0f7 08051913895f 5ae7066e821d",
                         (107, 6.0, 91, 3592, 69), (12.8, 14.33814433)),
    "scripted-policy": ("014274557523 45742ad6f206 65dd58090fa2 3a488cb761af 9a3aa8d54c99",
                        (54, 12.0, 38, 3400, 104), (24.85, 33.019072165)),
    "scripted-sliding": ("c84a61a1ca52 ba626efaa7cd f492353e6fee 75f16e4066d8 2031b266c5f4",
                         (266, 1.0, 250, 4019, 73), (2.8, 3.490721649)),
    "scripted-threshold-keep-k2": ("5b1b10689a65 132ce6b118ea a46adbe29372 f88afab403c1 ad905e69bcfb",
                                   (59, 11.0, 43, 3384, 84), (22.8, 27.2)),
    "sync-random": ("ee88352ad3f7 e4c4a52167a8 56931a809f1a b68279f44718 c3c935e6e118",
                    (73, 0.0, 57, 4361, 80), (0.8, 1.336082474)),
    "truncated": ("8984cefc3011 ae909e84d541 de2e131a0e33 3d4283ac1473 6054e41e9987",
                  (44, 6.0, 28, 2614, 83), (12.8, 19.509278351)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_same_seed_gives_the_same_rollout_batch(name: str) -> None:
    rb, log = play(CASES[name])
    hashes, totals, sums = fingerprint(rb, log)
    want = PINNED[name]
    changed = f"{name}: the harness's output changed for a fixed seed; see the module docstring"
    assert (hashes, totals) == want[:2], changed
    assert sums == pytest.approx(want[2], rel=1e-6, abs=1e-6), changed
    reasons = Counter(r.overlong for r in rb.rollouts)
    assert CASES[name].expect <= set(reasons), f"{name} no longer reaches {CASES[name].expect}: {reasons}"


def test_every_case_is_pinned_and_timings_are_left_out() -> None:
    assert set(PINNED) == set(CASES)
    hashed = {"batch", "segments", "rollouts", "config", "v_sum_version"}
    assert {f.name for f in dataclasses.fields(RolloutBatch)} - hashed == set(TIMINGS)


if __name__ == "__main__":  # re-record: python -m tests.harness.test_rollout_pins
    print("PINNED: dict[str, tuple[str, tuple[Any, ...], tuple[float, float]]] = {")
    for key in sorted(CASES):
        batch, calls = play(CASES[key])
        hashes, totals, sums = fingerprint(batch, calls)
        print(f'    "{key}": ("{hashes}",\n    {" " * len(key)}     {totals}, {sums}),')
        print(f"  {key}: {Counter(r.overlong for r in batch.rollouts)}", file=sys.stderr)
    print("}")
