"""The Gymnasium classes: one single env and one native vector env, shared by every simlab task.

Both are thin shells over ``simlab.tasks.core``: they draw instances with the task's generator and advance
them with ``core.step``. A ``TaskSpec`` says what differs between tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from simlab.rules import BATCH_MAX, IntIn, check_value
from simlab.tasks import core, keyrecall, peekread, pointerchase, vocab
from simlab.tasks.config import KeyRecallConfig, PeekReadConfig, PointerChaseConfig, TaskConfig
from simlab.tasks.core import IntArray


@dataclass(frozen=True)
class TaskSpec:
    """What one task contributes to the shared env classes."""

    name: str
    config_cls: type[TaskConfig]
    generate: Callable[[core.KeyArray, Any, core.KeyArray], core.Instances]
    """(episode keys, config, rollout keys) -> the episodes."""
    solver_cls: Callable[[Any], Any]
    act_tokens: Callable[[Any], IntArray]
    """Tokens a sensible action uses (the harness's ACT-phase mask)."""
    answer_tokens: Callable[[Any], IntArray]
    """Tokens an answer can be (the harness's ANSWER-phase mask)."""
    prompt_len: Callable[[Any], int]


KEY_RECALL = TaskSpec(
    name="KeyRecall",
    config_cls=KeyRecallConfig,
    generate=keyrecall.generate,
    solver_cls=keyrecall.KeyRecallSolver,
    act_tokens=lambda cfg: np.array([vocab.NEXT]),
    answer_tokens=lambda cfg: np.arange(*keyrecall.value_tokens(cfg)),
    prompt_len=lambda cfg: len(keyrecall.prompt_tokens(cfg)),
)

POINTER_CHASE = TaskSpec(
    name="PointerChase",
    config_cls=PointerChaseConfig,
    generate=pointerchase.generate,
    solver_cls=pointerchase.PointerChaseSolver,
    act_tokens=lambda cfg: np.arange(vocab.FIRST_CONTENT, vocab.FIRST_CONTENT + cfg.num_nodes),
    answer_tokens=lambda cfg: np.arange(vocab.FIRST_CONTENT, vocab.FIRST_CONTENT + cfg.num_nodes),
    prompt_len=pointerchase.prompt_tokens_len,
)

PEEK_READ = TaskSpec(
    name="PeekRead",
    config_cls=PeekReadConfig,
    generate=peekread.generate,
    solver_cls=peekread.PeekReadSolver,
    act_tokens=lambda cfg: np.array([peekread.PEEK, peekread.READ]),
    answer_tokens=lambda cfg: np.arange(*peekread.value_tokens(cfg)),
    prompt_len=lambda cfg: len(peekread.prompt_tokens(cfg)),
)


def _configure(task: TaskSpec, config: TaskConfig | None, overrides: dict[str, Any]) -> TaskConfig:
    cfg = config if config is not None else task.config_cls()
    if not isinstance(cfg, task.config_cls):
        raise TypeError(f"config must be a {task.config_cls.__name__}, got {type(cfg).__name__}")
    return cfg.replace(**overrides) if overrides else cfg  # a section is checked whenever it is built


def _metadata(task: TaskSpec, cfg: TaskConfig) -> dict[str, Any]:
    """The protocol metadata the harness reads (see the README's token-protocol section)."""
    return {
        "render_modes": [],
        "simlab_task": task.name,
        "act_tokens": task.act_tokens(cfg),
        "answer_tokens": task.answer_tokens(cfg),
        "prompt_tokens": task.prompt_len(cfg),
        "step_obs_tokens": cfg.max_obs_tokens(),
    }


ROLLOUT_OPTION = "rollout"
"""The reset option that names each env's rollout index in its group (the per-rollout stream's key)."""


def _rollout_option(options: dict[str, Any] | None, n: int, current: IntArray) -> IntArray:
    """The rollout index of each of ``n`` envs from reset ``options`` (an int for all, or one per env);
    ``current`` when the options do not say."""
    if not options:
        return current
    unknown = sorted(set(options) - {ROLLOUT_OPTION})
    if unknown:
        raise ValueError(f"`options={options!r}` is invalid; the only reset option is {ROLLOUT_OPTION!r} "
                         f"(unknown: {unknown})")
    value = options.get(ROLLOUT_OPTION)
    if value is None:
        return current
    arr = np.asarray(value)
    ok = np.issubdtype(arr.dtype, np.integer) and arr.ndim <= 1 and (arr.ndim == 0 or arr.size == n)
    if not ok or (arr.size and arr.min() < 0):
        shape = "an integer >= 0" if n == 1 else f"an integer >= 0 or a list of {n} of them (one per env)"
        raise ValueError(f"`options['rollout']={value!r}` is invalid; choose {shape}")
    return np.broadcast_to(arr.astype(np.int64), (n,)).copy()


def _fresh_seed() -> int:
    return int(np.random.SeedSequence().entropy % (1 << 62))  # type: ignore[operator]


def _check_actions(actions: Any, vocab_size: int) -> IntArray:
    a = np.asarray(actions)
    if not np.issubdtype(a.dtype, np.integer) or a.size == 0 or a.min() < 0 or a.max() >= vocab_size:
        raise ValueError(f"`action={actions!r}` is invalid; choose an integer in [0, {vocab_size})")
    return a.astype(np.int64)


class TokenTaskEnv(gym.Env[IntArray, Any]):
    """A simlab task as a single Gymnasium env; see the task class docstring for its spec."""

    task: ClassVar[TaskSpec]

    def __init__(self, config: TaskConfig | None = None, render_mode: str | None = None, **overrides: Any):
        self.config = _configure(self.task, config, overrides)
        self.render_mode = render_mode
        self.width = core.obs_width(self.config, self.task.prompt_len(self.config))
        self.observation_space = spaces.MultiDiscrete(
            np.full(self.width, self.config.vocab_size), dtype=np.int64
        )
        self.action_space = spaces.Discrete(self.config.vocab_size)
        self.metadata = _metadata(self.task, self.config)
        self.solver = self.task.solver_cls(self.config)
        self._base: int | None = None
        self._episode = 0
        self._rollout = np.zeros(1, dtype=np.int64)
        self.instances: core.Instances | None = None
        self._state = core.initial_state(1)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[IntArray, dict[str, Any]]:
        """Draw a fresh instance (from ``seed``, else the next one of the env's stream); its prompt.

        ``options={"rollout": j}`` makes this rollout j of its instance's group (default 0; kept by later
        resets until changed): what the task draws per rollout comes from (instance, j).
        """
        super().reset(seed=seed)
        self._rollout = _rollout_option(options, 1, self._rollout)
        if seed is not None:
            self._base, self._episode = int(seed), 0
        elif self._base is None:
            self._base, self._episode = _fresh_seed(), 0
        else:
            self._episode += 1
        keys = core.episode_keys(np.array([self._base]), np.array([self._episode]))
        self.instances = self.task.generate(keys, self.config, core.rollout_keys(keys, self._rollout))
        self._state = core.initial_state(1)
        return self.instances.prompt[0].copy(), {"hard": bool(self.instances.hard[0])}

    def step(self, action: int) -> tuple[IntArray, float, bool, bool, dict[str, Any]]:
        """Play ``action``; the next observation, the reward, and whether the episode ended."""
        if self.instances is None:
            raise RuntimeError("call reset() before step()")
        a = _check_actions(action, self.config.vocab_size).reshape(1)
        obs, reward, terminated, self._state = core.step(self.instances, self._state, a)
        return obs[0], float(reward[0]), bool(terminated[0]), False, {"failed": bool(self._state.failed[0])}


class TokenTaskVectorEnv(VectorEnv[IntArray, IntArray, Any]):
    """A simlab task as a native, numpy-batched Gymnasium vector env (NEXT_STEP autoreset).

    ``reset(seed=s)`` seeds env i with ``s + i``, like ``SyncVectorEnv``; env i then produces exactly
    the episodes of a single env reset with ``seed=s+i`` and reset without a seed after each episode.
    """

    task: ClassVar[TaskSpec]
    refill_share: float = 0.125
    """Redraw buffered next episodes once this share of envs has used theirs."""

    def __init__(
        self,
        num_envs: int = 1,
        config: TaskConfig | None = None,
        render_mode: str | None = None,
        **overrides: Any,
    ):
        check_value("num_envs", num_envs, IntIn(1, BATCH_MAX))
        self.config = _configure(self.task, config, overrides)
        self.num_envs = num_envs
        self.render_mode = render_mode
        self.width = core.obs_width(self.config, self.task.prompt_len(self.config))
        self.single_observation_space = spaces.MultiDiscrete(
            np.full(self.width, self.config.vocab_size), dtype=np.int64
        )
        self.single_action_space = spaces.Discrete(self.config.vocab_size)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.metadata = {**_metadata(self.task, self.config), "autoreset_mode": AutoresetMode.NEXT_STEP,
                         "reset_options": (ROLLOUT_OPTION,)}
        self.solver = self.task.solver_cls(self.config)
        self._base: IntArray | None = None
        self._episode = np.zeros(num_envs, dtype=np.int64)
        self._rollout = np.zeros(num_envs, dtype=np.int64)
        """Each env's rollout index in its group: with the episode key, the key of its per-rollout stream."""
        self._autoreset = np.zeros(num_envs, dtype=np.bool_)
        self.instances: core.Instances | None = None
        self._next: core.Instances | None = None
        """Every env's next episode, drawn ahead in bulk: autoresets copy rows instead of drawing
        a handful of instances per step, which is what makes the batched step cheap."""
        self._stale = np.zeros(num_envs, dtype=np.bool_)
        self._state = core.initial_state(num_envs)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[IntArray, dict[str, Any]]:
        """Draw a fresh instance per env (``seed``: an int gives env i ``seed + i``, a list one each); the prompts.

        ``options={"rollout": [j_0, ..., j_{n-1}]}`` (or one int for all) makes env i rollout j_i of its
        instance's group, as a single env reset with ``options={"rollout": j_i}``; kept until changed.
        """
        self._rollout = _rollout_option(options, self.num_envs, self._rollout)
        if seed is not None:
            seeds = [seed + i for i in range(self.num_envs)] if isinstance(seed, int) else list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"`seed` has {len(seeds)} entries; give one per env ({self.num_envs})")
            self._base = np.asarray(seeds, dtype=np.int64)
            self._episode[:] = 0
        elif self._base is None:
            self._base = _fresh_seed() + np.arange(self.num_envs, dtype=np.int64)
            self._episode[:] = 0
        else:
            self._episode += 1
        self.instances = self._draw(np.arange(self.num_envs), self._episode)
        self._next = self._draw(np.arange(self.num_envs), self._episode + 1)
        self._stale[:] = False
        self._state = core.initial_state(self.num_envs)
        self._autoreset[:] = False
        return self.instances.prompt.copy(), {"hard": self.instances.hard.copy()}

    def step(self, actions: IntArray) -> tuple[IntArray, Any, Any, Any, dict[str, Any]]:
        """Play one action per env; finished envs start their next instance on the following step."""
        if self.instances is None or self._next is None or self._base is None:
            raise RuntimeError("call reset() before step()")
        a = _check_actions(actions, self.config.vocab_size).reshape(self.num_envs)
        obs, reward, terminated, state = core.step(self.instances, self._state, a)
        rows = np.flatnonzero(self._autoreset)
        if rows.size:
            # NEXT_STEP autoreset: an env that terminated last step starts its next episode now and
            # ignores its action (the transition it returns is the reset, with reward 0)
            if self._stale[rows].any():
                self._refill()
            self._episode[rows] += 1
            fresh = core.take_rows(self._next, rows)
            core.replace_rows(self.instances, rows, fresh)
            self._stale[rows] = True
            if self._stale.sum() >= self.refill_share * self.num_envs:
                self._refill()
            obs[rows] = fresh.prompt
            reward[rows] = 0.0
            terminated[rows] = False
            core.reset_rows(state, rows)
        self._state = state
        self._autoreset = terminated.copy()
        truncated = np.zeros(self.num_envs, dtype=np.bool_)
        return obs, reward, terminated, truncated, {}

    def _draw(self, rows: IntArray, episodes: IntArray) -> core.Instances:
        """Episode ``episodes[k]`` of env ``rows[k]``, as rollout ``self._rollout[rows[k]]`` of its group."""
        assert self._base is not None
        keys = core.episode_keys(self._base[rows], episodes)
        return self.task.generate(keys, self.config, core.rollout_keys(keys, self._rollout[rows]))

    def _refill(self) -> None:
        """Draw the next episode of every env whose buffered one was used."""
        assert self._next is not None and self._base is not None
        rows = np.flatnonzero(self._stale)
        core.replace_rows(self._next, rows, self._draw(rows, self._episode[rows] + 1))
        self._stale[rows] = False


_TASK_DOC = """
    ## Action Space
    ``Discrete(vocab_size)``: one token per step. ``metadata["act_tokens"]`` lists the sensible ones;
    any id in range is accepted, an id outside it raises ``ValueError``.

    ## Observation Space
    ``MultiDiscrete([vocab_size] * width)``: token ids right-padded with PAD (0). ``reset`` returns the
    task prompt; each step returns that step's observation. The observation that ends with QUERY
    asks for the answer: the next action is the answer.

    ## Rewards
    0 on every step but the answer; the answer gets 1 if it is correct and no earlier action was
    fatal, else 0.

    ## Starting State
    A fresh instance drawn from the config: horizon, observation lengths (heavy tail optional),
    hardness (``hard_frac``), padding (``compaction_reward_corr``) and action slips (``noise``).
    ``options={"rollout": j}`` is accepted and changes nothing here: this task draws nothing per rollout.

    ## Episode End
    Terminates after the answer (step ``horizon + 1``). Never truncates; the harness caps steps.
"""


class KeyRecallEnv(TokenTaskEnv):  # noqa: D101  (its docstring is assembled: __doc__ below)
    __doc__ = (
        """KeyRecall: remember the fact that will be asked about.

    ``num_facts`` facts ``FACT key value`` appear in the first ``fact_frac`` of the horizon, inside
    distractor tokens; the last observation is ``key QUERY`` and the answer is that key's value.
    Low-id keys are asked more often (``zipf``), so a summary that cannot hold every fact should keep
    the hot ones. Actions before the query are ignored (``NEXT`` is the sensible one). In a hard
    instance the asked fact is never shown.
    """
        + _TASK_DOC
    )
    task = KEY_RECALL


class KeyRecallVectorEnv(TokenTaskVectorEnv):  # noqa: D101  (its docstring is assembled: __doc__ below)
    __doc__ = KeyRecallEnv.__doc__
    task = KEY_RECALL


class PointerChaseEnv(TokenTaskEnv):  # noqa: D101  (its docstring is assembled: __doc__ below)
    __doc__ = (
        """PointerChase: follow links, keep a running sum.

    The prompt is ``TASK start LINK a b ...``; every later observation opens with a step index and
    holds the next table of ``num_pairs`` ``LINK a b`` pairs. The action is the node the current
    node links to; a wrong move is fatal. The answer is the sum of the visited nodes mod
    ``num_nodes``. In a hard instance one table lacks the true pair.
    """
        + _TASK_DOC
    )
    task = POINTER_CHASE


class PointerChaseVectorEnv(TokenTaskVectorEnv):  # noqa: D101  (its docstring is assembled: __doc__ below)
    __doc__ = PointerChaseEnv.__doc__
    task = POINTER_CHASE


class PeekReadEnv(TokenTaskEnv):
    """PeekRead: what the agent reads sets how much context it spends.

    One fact ``FACT key value`` is stated early (at a step in the first ``fact_frac`` of the horizon,
    the *fact step*); the last observation is ``key QUERY`` and the answer is the value. In a hard
    instance the fact is never stated. A rollout that reads more compacts more, so the number of
    compactions K varies between the rollouts of one prompt as a consequence of what each did.

    ## Action Space
    ``Discrete(vocab_size)``: one token per step. ``PEEK`` (the first content id) asks for a short
    observation, ``READ`` (the second) for a long one; any other id counts as a peek
    (``metadata["act_tokens"]`` lists the two). An id outside the space raises ``ValueError``.

    ## Observation Space
    ``MultiDiscrete([vocab_size] * width)``: token ids right-padded with PAD (0). ``reset`` returns the
    prompt ``TASK``. A peek returns ``obs_tokens`` tokens, a read ``read_tokens``; the fact opens the
    observation of the fact step on the routes that show it:

    - ``read_payoff`` > 0: the read shows it; a peek only with probability ``1 - read_payoff``.
    - ``read_payoff`` < 0: both show it, and each later step before the query is a trap with
      probability ``|read_payoff|``: a read there breaks the episode.
    - ``read_payoff`` = 0: both show it.

    **Bursts** (``burst_prob`` > 0): a read at the fact step bursts with probability ``burst_prob``, per
    rollout: the next ``burst_steps`` observations are ``burst_tokens`` of distractor values each (never a
    fake fact), and with ``burst_restates`` the one after them is short and opens with the fact again,
    whatever the agent does at those steps; all cut short before the query. Under a threshold trigger
    with the discard rule, a burst observation longer than L - 8 forces one compaction each and is
    dropped, so a burst reader ends with ``burst_steps`` more segments than a reader without one.
    **Coupling** c (``coupling``), per rollout, on the read at the fact step: c > 0, a burst read loses
    the fact with probability c (the long output buries it, and does not restate it); c < 0, a read
    without a burst loses it with probability |c| (the short output is truncated, the long one is
    complete); c = 0, a burst changes only the context spent.

    ## Rewards
    0 on every step but the answer; the answer gets 1 if it is the value and no trap was read, else 0.

    ## Starting State
    ``reset(seed=s)`` draws the instance (horizon, fact step, key, value, observation lengths, hardness,
    which peeks show the fact, traps, slips) from s. ``reset(options={"rollout": j})`` makes the episode
    rollout j of its group (default 0, kept until changed): bursts and the coupling are drawn from
    (instance, j), so the G rollouts of one prompt share the instance and differ only there. The
    vector env takes one index per env (``options={"rollout": [j_0, ...]}``); the harness passes
    ``i % G`` for env i.

    ## Episode End
    Terminates after the answer (step ``horizon + 1``). Never truncates; the harness caps steps.
    """

    task = PEEK_READ


class PeekReadVectorEnv(TokenTaskVectorEnv):  # noqa: D101  (its docstring is assembled: __doc__ below)
    __doc__ = PeekReadEnv.__doc__
    task = PEEK_READ
