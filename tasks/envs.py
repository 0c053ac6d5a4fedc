"""The registered Gymnasium classes of every simlab task: its ``TaskSpec`` and its single and vector env.

Each class is a thin subclass of the shared shells in :mod:`simlab.tasks.shells` (which draw instances
with the task's generator and advance them with ``core.step``); the ``TaskSpec`` says what differs
between tasks, and the class docstring is the task's spec. ``simlab.tasks`` registers these classes
with Gymnasium by their path here (``simlab.tasks.envs:KeyRecallEnv``).
"""

from __future__ import annotations

import numpy as np

from simlab.tasks import keyrecall, peekread, pointerchase, vocab
from simlab.tasks.config import KeyRecallConfig, PeekReadConfig, PointerChaseConfig
from simlab.tasks.shells import TaskSpec, TokenTaskEnv, TokenTaskVectorEnv

KEY_RECALL = TaskSpec(
    name="KeyRecall",
    config_cls=KeyRecallConfig,
    generate=keyrecall.generate,
    solver_cls=keyrecall.KeyRecallSolver,
    act_tokens=lambda cfg: np.array([vocab.NEXT]),
    answer_tokens=lambda cfg: np.arange(*keyrecall.value_tokens(cfg)),
    prompt_len=keyrecall.prompt_len,
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
