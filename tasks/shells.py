"""The shared Gymnasium shells every simlab task runs in: one single env and one native vector env.

:class:`TokenTaskEnv` and :class:`TokenTaskVectorEnv` draw instances with the task's generator and
advance them with ``core.step``; a :class:`TaskSpec` says what differs between tasks. The registered
per-task classes (``KeyRecallEnv``, ...) and their specs are in :mod:`simlab.tasks.envs`. Also here: the
reset option that names a rollout's index in its group (:data:`ROLLOUT_OPTION`).
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

from simlab.rules import BATCH_MAX, check_value, ints
from simlab.tasks import core
from simlab.tasks.config import TaskConfig
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


def _configure(task: TaskSpec, config: TaskConfig | None, overrides: dict[str, Any]) -> TaskConfig:
    cfg = config if config is not None else task.config_cls()
    if not isinstance(cfg, task.config_cls):
        raise TypeError(f"config must be a {task.config_cls.__name__}, got {type(cfg).__name__}")
    return cfg.replace(**overrides) if overrides else cfg  # a section is checked whenever it is built


def _metadata(task: TaskSpec, cfg: TaskConfig) -> dict[str, Any]:
    """The protocol metadata the harness reads (see docs/tasks-and-harness.md's token-protocol section)."""
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
        check_value("num_envs", num_envs, ints(1, BATCH_MAX))
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
