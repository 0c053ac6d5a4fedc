"""The pure core every simlab task shares: counter-based randomness, instance arrays, step dynamics.

A task is a generator ``generate(keys, config) -> Instances`` that lays out a whole episode per
instance as arrays (prompt, every observation, the expected action per step, the answer). ``step``
is the one dynamics function: the single env calls it with a batch of one, the vector env with all
of its envs. Randomness is a pure function of (episode key, stream, counter), so instance i of a
vector env reset with ``seed=s`` is exactly the instance a single env reset with ``seed=s+i`` gets.

A second family of keys, :func:`rollout_keys`, is keyed by (episode key, rollout index): the G rollouts
of one prompt share the episode key (the instance: its facts, its question) and draw what may differ
between them (PeekRead's bursts) from their own rollout key.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from simlab.tasks import vocab
from simlab.tasks.config import TaskConfig

IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]
FloatArray = NDArray[np.float64]
KeyArray = NDArray[np.uint64]

ANY_ACTION = -1
"""``Instances.expected`` value for a step whose action does not matter."""

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)


def _splitmix(x: KeyArray) -> KeyArray:
    """SplitMix64 finaliser, elementwise (uint64 arithmetic wraps, which is what it wants)."""
    z = x + _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


def episode_keys(base_seeds: IntArray, episodes: IntArray) -> KeyArray:
    """(n,) keys for episode ``episodes[i]`` of the env seeded with ``base_seeds[i]``."""
    with np.errstate(over="ignore"):
        b = _splitmix(np.asarray(base_seeds).astype(np.uint64))
        return _splitmix(b ^ _splitmix(np.asarray(episodes).astype(np.uint64) + np.uint64(1)))


_ROLLOUT_SALT = np.uint64(0xD1B54A32D192ED03)
"""Separates rollout keys from episode keys (both are hashes of the env's base seed)."""


def rollout_keys(keys: KeyArray, rollouts: IntArray) -> KeyArray:
    """(n,) keys of the per-rollout stream: rollout ``rollouts[i]`` of the episode whose key is ``keys[i]``."""
    with np.errstate(over="ignore"):
        r = _splitmix(np.asarray(rollouts).astype(np.uint64) ^ _ROLLOUT_SALT)
        return _splitmix(np.asarray(keys, dtype=np.uint64) ^ r)


@functools.lru_cache(maxsize=256)
def _counter_hash(stream: int, size: int) -> KeyArray:
    """The key-independent half of a draw; cached because every reset asks for the same ones."""
    counter = np.arange(size, dtype=np.uint64) + np.uint64(stream) * np.uint64(1 << 32)
    with np.errstate(over="ignore"):
        out = _splitmix(counter)
    out.setflags(write=False)
    return out


def uniform(keys: KeyArray, stream: int, shape: tuple[int, ...]) -> FloatArray:
    """(n, *shape) floats in [0, 1) from ``keys``; each ``stream`` is an independent draw."""
    size = int(np.prod(shape)) if shape else 1
    with np.errstate(over="ignore"):
        bits = _splitmix(keys[:, None] ^ _counter_hash(stream, size)[None, :])
    u = (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
    return u.reshape((keys.size, *shape))


def randint(
    keys: KeyArray, stream: int, shape: tuple[int, ...], low: IntArray | int, high: IntArray | int
) -> IntArray:
    """Integers in ``[low, high)``; ``low``/``high`` broadcast against ``(n, *shape)``."""
    u = uniform(keys, stream, shape)
    lo = np.asarray(low)
    return (lo + np.floor(u * (np.asarray(high) - lo))).astype(np.int64)


def small_ints(keys: KeyArray, stream: int, shape: tuple[int, ...], low: int, high: int) -> IntArray:
    """Integers in ``[low, high)`` (``high - low <= 4096``) from 16-bit slices of each hash.

    Four draws per hash: the bulk filler tokens are most of an episode's randomness. The modulo bias
    is below ``(high - low) / 65536`` (0.1% at 64 content tokens), harmless for distractors.
    """
    n = keys.size
    size = int(np.prod(shape))
    words = -(-size // 4)
    with np.errstate(over="ignore"):
        bits = _splitmix(keys[:, None] ^ _counter_hash(stream, words)[None, :])
    parts = bits.astype("<u8").view("<u2").reshape(n, 4 * words)[:, :size]  # fixed byte order
    return (low + parts.astype(np.int64) % (high - low)).reshape((n, *shape))


@dataclass(frozen=True)
class Instances:
    """A batch of n fully laid-out episodes. H = max horizon, O = observation width."""

    prompt: IntArray
    """(n, O) the reset observation (task prompt), right-padded with PAD."""
    obs: IntArray
    """(n, H, O) observation returned by step t; the one at t = horizon-1 ends with QUERY."""
    expected: IntArray
    """(n, H) the action that keeps step t on track, or ANY_ACTION."""
    answer: IntArray
    """(n,) the correct answer token."""
    horizon: IntArray
    """(n,) steps before the answer is due."""
    hard: BoolArray
    """(n,) the decisive information was withheld (solvable only by chance)."""
    target: IntArray
    """(n,) a hidden token only the oracle reads (KeyRecall: the key that will be asked)."""
    slip: BoolArray
    """(n, H+1) the env replaces the action at step t by ``slip_action`` (noise)."""
    slip_action: IntArray
    """(n, H+1) the replacement action."""
    alt_obs: IntArray | None = None
    """(n, H, O) the observation step t returns instead of ``obs`` when its action is ``alt_action``:
    tasks whose actions choose what they see (PeekRead: a long read instead of a peek). ``None``: the
    observation never depends on the action."""
    alt_action: IntArray | None = None
    """(n,) the action that selects ``alt_obs`` (with it; ``None`` without)."""
    arm_step: IntArray | None = None
    """(n,) the step at which ``alt_action`` arms this rollout's burst; -1: it has none. ``None``: the
    task has no bursts (then ``burst`` and ``burst_obs`` are ``None`` too)."""
    burst: BoolArray | None = None
    """(n, H) the steps whose observation an armed burst replaces (after ``arm_step``, before the query)."""
    burst_obs: IntArray | None = None
    """(n, H, O) the observation of a burst step: what a long tool output looks like."""
    facts: IntArray | None = None
    """(n, F) the value token of each fact the episode states (KeyRecall), for summary metrics; ``None``:
    the task states no facts."""
    cued: IntArray | None = None
    """(n,) the index into ``facts`` of the fact the prompt's cue names; -1: no cue."""

    def summary_holds(self, i: int, content: IntArray) -> dict[str, bool]:
        """What a summary ``content`` written in episode ``i`` holds, by the keys of
        :data:`simlab.names.SUMMARY_HOLDS`: ``answer`` (the asked answer token) always; where the episode states
        facts, ``all_facts`` (every fact's value); and where it also has a cue, ``cued`` (the cued fact's value)
        and ``uncued`` (another fact's value). A key left out does not apply to the episode. The harness counts
        these and knows no task."""
        out = {"answer": bool((content == self.answer[i]).any())}
        if self.facts is None:
            return out
        held = np.isin(self.facts[i], content)
        out["all_facts"] = bool(held.all())
        cued = -1 if self.cued is None else int(self.cued[i])
        if cued >= 0:
            out["cued"] = bool(held[cued])
            out["uncued"] = bool(np.delete(held, cued).any())
        return out


@dataclass(frozen=True)
class StepState:
    """Per-instance progress: the only thing ``step`` changes."""

    t: IntArray
    """(n,) steps taken in the current episode."""
    failed: BoolArray
    """(n,) an action went off track (the episode can no longer be won)."""
    armed: BoolArray
    """(n,) the rollout's burst was armed (``alt_action`` at ``arm_step``): its burst steps are long."""


def initial_state(n: int) -> StepState:
    """The state of ``n`` fresh episodes: no steps taken, none failed, no burst armed."""
    return StepState(t=np.zeros(n, dtype=np.int64), failed=np.zeros(n, dtype=np.bool_),
                     armed=np.zeros(n, dtype=np.bool_))


def reset_rows(state: StepState, rows: IntArray) -> None:
    """Start ``rows`` of ``state`` afresh, in place (the vector env's autoreset)."""
    state.t[rows] = 0
    state.failed[rows] = False
    state.armed[rows] = False


def step(
    inst: Instances, state: StepState, actions: IntArray
) -> tuple[IntArray, FloatArray, BoolArray, StepState]:
    """One step of every instance: the single pure dynamics function of all simlab tasks.

    Steps ``t < horizon`` check the action against ``expected`` (a miss is fatal, but the episode runs
    on so that its length never depends on the outcome) and return observation t. Step ``t = horizon``
    is the answer: reward 1 if nothing failed and the (possibly slipped) action equals ``answer``, and
    the episode terminates. A rollout whose action at ``arm_step`` is ``alt_action`` is armed: from
    then on its ``burst`` steps return ``burst_obs`` whatever the action (the rest of a long output).

    Returns:
        obs (n, O), reward (n,), terminated (n,), next state.
    """
    n, h, o = inst.obs.shape
    t = state.t
    # flat row-major indices: np.take on a flat view is several times cheaper than 2-D fancy indexing
    base = np.arange(n) * h
    at_slip = base + np.arange(n) + np.minimum(t, h)  # slip arrays are (n, H+1)
    a = np.where(inst.slip.ravel().take(at_slip), inst.slip_action.ravel().take(at_slip), actions)
    moving = t < inst.horizon
    at = base + np.minimum(t, h - 1)
    expected = inst.expected.ravel().take(at)
    failed = state.failed | (moving & (expected != ANY_ACTION) & (a != expected))
    terminated = ~moving
    reward = (terminated & ~failed & (a == inst.answer)).astype(np.float64)
    obs = inst.obs.reshape(n * h, o).take(at, axis=0)
    if inst.alt_obs is not None and inst.alt_action is not None:
        alt = a == inst.alt_action
        if alt.any():
            obs[alt] = inst.alt_obs.reshape(n * h, o).take(at[alt], axis=0)
    armed = _bursts(inst, state, a, at, moving, obs)
    if terminated.any():
        obs[terminated] = vocab.PAD
    return obs, reward, terminated, StepState(t=t + 1, failed=failed, armed=armed)


def _bursts(inst: Instances, state: StepState, a: IntArray, at: IntArray, moving: BoolArray,
            obs: IntArray) -> BoolArray:
    """Arm the bursts this step's actions trigger and put armed burst observations into ``obs``, in
    place; the armed flags after this step."""
    if inst.arm_step is None or inst.burst is None or inst.burst_obs is None:
        return state.armed
    armed = state.armed | (moving & (state.t == inst.arm_step) & (a == inst.alt_action))
    long = armed & moving & inst.burst.ravel().take(at)
    if long.any():
        o = inst.burst_obs.shape[2]
        obs[long] = inst.burst_obs.reshape(-1, o).take(at[long], axis=0)
    return armed


def take_rows(inst: Instances, rows: IntArray) -> Instances:
    """The instances at ``rows``, copied."""
    fields = {f: getattr(inst, f) for f in Instances.__dataclass_fields__}
    return Instances(**{f: None if x is None else x[rows] for f, x in fields.items()})  # type: ignore[arg-type]


def replace_rows(inst: Instances, rows: IntArray, new: Instances) -> None:
    """Overwrite ``rows`` of ``inst`` in place with ``new`` (the vector env's autoreset)."""
    for f in Instances.__dataclass_fields__:
        if (x := getattr(inst, f)) is not None:
            x[rows] = getattr(new, f)


@dataclass(frozen=True)
class Layout:
    """The task-independent part of a batch of episodes, drawn from the common controls."""

    horizon: IntArray
    """(n,) steps before the query."""
    hard: BoolArray
    """(n,) instances whose decisive information will be withheld."""
    lengths: IntArray
    """(n, H) observation length of each step (padding and heavy tail included)."""
    filler: IntArray
    """(n, H, O) distractor content tokens, PAD beyond each step's length."""
    slip: BoolArray
    slip_action: IntArray

    @property
    def width(self) -> int:
        """O, the observation width every step of these episodes is padded to."""
        return int(self.filler.shape[2])

    def instances(self, *, prompt: IntArray, obs: IntArray, expected: IntArray, answer: IntArray,
                  target: IntArray, alt_obs: IntArray | None = None, alt_action: IntArray | None = None,
                  arm_step: IntArray | None = None, burst: BoolArray | None = None,
                  burst_obs: IntArray | None = None, facts: IntArray | None = None,
                  cued: IntArray | None = None) -> Instances:
        """Complete a task's episode arrays with this layout's horizon, hardness and slips."""
        return Instances(prompt=pad_row(prompt, obs.shape[2]), obs=obs, expected=expected, answer=answer,
                         horizon=self.horizon, hard=self.hard, target=target, slip=self.slip,
                         slip_action=self.slip_action, alt_obs=alt_obs, alt_action=alt_action,
                         arm_step=arm_step, burst=burst, burst_obs=burst_obs, facts=facts, cued=cued)


def max_step_tokens(cfg: TaskConfig) -> int:
    """The longest observation a step can return (padding, heavy tail and bursts included)."""
    extra = round(abs(cfg.compaction_reward_corr) * cfg.corr_pad_tokens)
    return max(cfg.max_obs_tokens() + extra, cfg.tail_tokens if cfg.tail_prob > 0 else 0, cfg.max_burst_tokens())


def obs_width(cfg: TaskConfig, prompt_len: int) -> int:
    """O: the fixed observation width of a task config (widest step, heavy tail or prompt)."""
    return max(max_step_tokens(cfg), prompt_len)


def draw_layout(keys: KeyArray, cfg: TaskConfig, prompt_len: int) -> Layout:
    """Horizons, hardness, observation lengths and filler for ``keys`` (streams 0-5 are used here), at the
    observation width of ``cfg`` with a prompt of ``prompt_len`` tokens (:func:`obs_width`).

    The ``compaction_reward_corr`` knob acts only here: it lengthens every observation of either the
    easy or the hard instances, so those need more compactions, and nothing else changes.
    """
    n = keys.size
    h = cfg.horizon[1]
    width = obs_width(cfg, prompt_len)
    horizon = randint(keys, 0, (), cfg.horizon[0], cfg.horizon[1] + 1)
    hard = uniform(keys, 1, ()) < cfg.hard_frac
    corr = cfg.compaction_reward_corr
    padded = ~hard if corr > 0 else (hard if corr < 0 else np.zeros(n, dtype=np.bool_))
    extra = round(abs(corr) * cfg.corr_pad_tokens)
    lengths = randint(keys, 2, (h,), cfg.obs_tokens[0], cfg.obs_tokens[1] + 1) + padded[:, None] * extra
    tail = uniform(keys, 3, (h,)) < cfg.tail_prob
    lengths = np.where(tail, cfg.tail_tokens, lengths)
    filler = small_ints(keys, 4, (h, width), vocab.FIRST_CONTENT, cfg.vocab_size)
    filler[np.arange(width)[None, None, :] >= lengths[:, :, None]] = vocab.PAD
    slip = uniform(keys, 5, (h + 1,)) < cfg.noise
    slip_action = randint(keys, 6, (h + 1,), vocab.FIRST_CONTENT, cfg.vocab_size)
    return Layout(
        horizon=horizon, hard=hard, lengths=lengths, filler=filler, slip=slip, slip_action=slip_action
    )


def pad_row(tokens: IntArray, width: int) -> IntArray:
    """Right-pad (n, k) token rows with PAD to (n, width)."""
    out = np.full((tokens.shape[0], width), vocab.PAD, dtype=np.int64)
    out[:, : tokens.shape[1]] = tokens
    return out


def summary_block(ctx: IntArray, start: int) -> IntArray:
    """The tokens after the SUMMARY marker at ``start``, up to the next harness marker."""
    rest = ctx[start + 1 :]
    stops = np.flatnonzero((rest == vocab.ACT) | (rest == vocab.ANSWER) | (rest == vocab.VSUM))
    return rest[: stops[0]] if stops.size else rest
