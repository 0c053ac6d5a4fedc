"""Task presets: named parameter sets sized for a tiny transformer on a 2-core CPU.

Each preset pairs a task config with the harness settings it was calibrated under (window W, trigger,
summary length m, tail k, caps S and H). ``simlab inspect --task NAME`` runs one; the calibration table
of docs/tasks-and-harness.md has their oracle / scripted / random success rates.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Annotated, Any

from simlab.rules import Names, check_value
from simlab.tasks.config import KeyRecallConfig, PeekReadConfig, PointerChaseConfig, TaskConfig

LATER_FIELDS: dict[str, Any] = {"reread": False, "cue_reliability": None, "cue_at": "prompt",
                                "distractors": True}
"""Task fields added after presets were measured, with their defaults: a preset that leaves one at its
default hashes as it did before the field existed, so its measurements stay keyed to it."""


def hashed_fields(task: TaskConfig, later: dict[str, Any] = LATER_FIELDS) -> dict[str, Any]:
    """A task config's fields as a hash sees them: a field of ``later`` at its default left out."""
    return {k: v for k, v in task.model_dump(mode="json").items() if k not in later or later[k] != v}


@dataclass(frozen=True)
class Preset:
    """A task config with the harness, policy, base and train settings it was calibrated under."""

    name: str
    env_id: str
    """The Gymnasium id, e.g. ``simlab/KeyRecall-v0``."""
    task: TaskConfig
    harness: dict[str, Any] = field(default_factory=dict)
    """``HarnessConfig`` fields this preset was calibrated with."""
    about: str = ""
    policy: dict[str, Any] = field(default_factory=dict)
    """Policy shape the preset is sized for (``simlab.policy.PolicyConfig`` fields)."""
    base: dict[str, Any] = field(default_factory=dict)
    """Base-model settings (``simlab.config.BaseConfig`` fields) that give a competent, imperfect start."""
    train: dict[str, Any] = field(default_factory=dict)
    """RL settings (``simlab.config.TrainConfig`` fields) the preset learns with; a recipe's own win."""

    def fingerprint(self) -> str:
        """A hash of everything the preset sets: a measurement recorded with it is stale once it moves."""
        parts = [hashed_fields(self.task), self.harness, self.policy, self.base, self.train]
        blob = json.dumps(parts, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]


_KR = "simlab/KeyRecall-v0"
_PC = "simlab/PointerChase-v0"
_PR = "simlab/PeekRead-v0"


def _peekread(name: str, payoff: float, base_steps: int, about: str) -> Preset:
    """The PeekRead trio: one geometry, one policy shape, one RL budget; only ``read_payoff`` moves.

    A skimmer's whole episode fits under L (one segment), a reader's takes three; the fact opens the
    first observation. Behaviour cloning needs 300 steps to copy the fact when only reads show it
    (``read_payoff`` = 1: half the demonstrations never see it) and 120 otherwise, which puts every base
    model between 0.35 and 0.75 (docs/tasks-and-harness.md, "Task presets and their calibration").
    """
    return Preset(
        name, _PR,
        PeekReadConfig(vocab_size=26, horizon=(5, 6), read_tokens=(14, 16), hard_frac=0.2, read_payoff=payoff),
        dict(window=56, frac=0.8, summary_tokens=2, tail_steps=1, max_compactions=4, max_steps=16),
        about,
        policy=dict(n_layer=2, n_head=4, d_model=64),
        base=dict(steps=base_steps, episodes=64, lr=1e-3),
        train=dict(lr=6e-4, prompts=32, steps=20),
    )


def _routes(name: str, about: str, *, coupling: float = 0.0, burst_prob: float = 0.5, burst_steps: int = 2,
            max_compactions: int = 4, horizon: tuple[int, int] = (6, 7), window: int = 88,
            read_payoff: float = 0.75) -> Preset:
    """The two-route PeekRead family: one geometry, one policy shape, one RL budget.

    The route is the first action. READ shows the fact (the better route); with probability
    ``burst_prob`` per rollout its output bursts over the next ``burst_steps`` observations, each longer
    than L, so under SUPO's discard rule a burst reader compacts ``burst_steps`` times (K = 1 + burst_steps)
    while every other rollout fits one segment (K = 1). PEEK shows the fact with probability
    1 - ``read_payoff`` (the short, safe, worse route). ``coupling`` ties a burst to the read losing the fact.
    The base model clones the scripted agent on full information (``base.teach = "full"``), so it copies
    the fact on both routes and splits them about 50/50.

    How it was found (SUPO, 20 steps, seeds 0-2, each with its own base model and held-out set; the
    per-seed figures are in docs/tasks-and-harness.md): behaviour cloning learns the copy of the fact in
    one drop of its loss, whose step varies by seed (at lr 1e-3 between about 150 and 400 steps). At lr
    1e-3 a 120-step base model stayed at chance (0.19 -> 0.25 after RL), 180 steps left 7 of 9
    overlong-family base models at chance and 300 steps still 3 of 6; 400 steps at lr 2e-3 cloned all
    of them (overlong-10: 0.21 -> 0.25 became 0.65 -> 0.83 on seed 0). Without the restated fact the
    trained in-group corr(K, R) at c = 0 was -0.29 to -0.41 (the learned summariser drops the fact on
    burst readers); with it -0.07 to -0.25. With those base models c = -0.1 cancelled it (-0.07 to +0.19);
    with the final ones (which the trained policy sharpens to 0.93-0.99) c = 0 gave -0.18 and -0.09 and
    c = -0.1 +0.09 to +0.14, hence the control's c = -0.05.
    ``read_payoff`` 0.75 leaves READ the better route at every c (at c = 1 by (0.75 - 0.5) x 7/8 = 0.22),
    so the token normaliser's policy reads; the bandit of issue 17 then has a weight ratio w of 2.48 (the
    step-0 action's segment-normaliser weight in burst against other readers, measured).
    """
    return Preset(
        name, _PR,
        PeekReadConfig(vocab_size=34, horizon=horizon, obs_tokens=(3, 4), read_tokens=(7, 8), hard_frac=0.0,
                       read_payoff=read_payoff, burst_prob=burst_prob, burst_steps=burst_steps,
                       burst_tokens=window - 8, coupling=coupling),
        dict(window=window, frac=0.95, summary_tokens=2, tail_steps=0, max_compactions=max_compactions,
             max_steps=2 * horizon[1] + 2),
        about,
        policy=dict(n_layer=2, n_head=4, d_model=64),
        base=dict(steps=400, episodes=64, lr=2e-3, teach="full"),
        train=dict(lr=6e-4, prompts=32, steps=20),
    )


def _overread(name: str, about: str, *, window: int, max_compactions: int = 1) -> Preset:
    """The over-read PeekRead family (issue 43, finding 4): overlong is the policy's choice.

    The routes family's geometry without bursts (c = 0, ``read_payoff`` 0.75: READ at step 0 shows the
    fact, a peek a quarter of the time), in a window so small that every rollout compacts once and the
    compaction cap S allows only that one. A rollout that reads at step 0 and peeks afterwards (the
    oracle) fits; one that keeps reading needs a second compaction and ends overlong. The scripted agent
    repeats its last action, so its readers read on: how much of a rollout is read, and so whether it
    ends overlong, is what the policy does, not a draw of the environment.

    How it was found (issue 43, a 1-seed pilot on seed 0; 1024 episodes under SUPO's harness, L = 0.88 W):
    at W = 40 the scripted agent ran out of S = 1 2% of the time, at W = 36 27% (W = 34: 34%); the oracle
    (read at step 0, then peek) never did and succeeded 1.00 at both. At W = 36 the scripted agent's
    success is 0.39 (READ 0.43, PEEK 0.36) and seed 0's base model (the routes family's base settings)
    0.38, overlong 0.26 (READ 0.44, PEEK 0.32). Under SUPO (20 steps, seed 0) without the overlong mask
    the training overlong rate fell from 0.28 to 0.04-0.09 by step 6, with the mask it stayed at 0.25-0.35
    through step 12: the policy can lower it by choice. With ``task.coupling = -1`` (a read never shows
    the fact; the same base model) the scripted agent's overlong rate is the same 0.27, READ 0.06, PEEK
    0.33: overlong costs a reader nothing it would have won (finding 4's control).
    """
    return Preset(
        name, _PR,
        PeekReadConfig(vocab_size=34, horizon=(6, 7), obs_tokens=(3, 4), read_tokens=(7, 8), hard_frac=0.0,
                       read_payoff=0.75),
        dict(window=window, frac=0.88, summary_tokens=2, tail_steps=0, max_compactions=max_compactions,
             max_steps=16),
        about,
        policy=dict(n_layer=2, n_head=4, d_model=64),
        base=dict(steps=400, episodes=64, lr=2e-3, teach="full"),
        train=dict(lr=6e-4, prompts=32, steps=20),
    )


def _long_k(name: str, about: str, burst_steps: int, burst_prob: float = 1.0) -> Preset:
    """The long-K PeekRead family: every read at the first step bursts for ``burst_steps`` observations, so a
    reader ends with K = 1 + ``burst_steps`` segments (1 with ``burst_prob`` 0); a peek never shows the fact.

    One geometry for every dose (10 steps, W = 100, L = 95 under SUPO): a reader without a burst fits one
    segment (2 + 10 x 9 = 92 tokens) and each 92-token burst observation crosses L from any context. The
    burst ends with the fact restated, so the reader's success does not hang on its K - 1 summaries.
    A peek never shows the fact (``read_payoff`` 1), so the trained policy reads and K is the dose.
    How it was found: as the routes family (seeds 0-2; at 180 base steps at lr 1e-3 one of twelve base
    models stayed at chance), with the routes family's base-model settings.
    """
    return Preset(
        name, _PR,
        PeekReadConfig(vocab_size=34, horizon=(10, 10), obs_tokens=(3, 3), read_tokens=(6, 6), hard_frac=0.0,
                       fact_frac=0.1, read_payoff=1.0, burst_prob=burst_prob, burst_steps=burst_steps,
                       burst_tokens=92),
        dict(window=100, frac=0.95, summary_tokens=2, tail_steps=0, max_compactions=8, max_steps=22),
        about,
        policy=dict(n_layer=2, n_head=4, d_model=64),
        base=dict(steps=400, episodes=64, lr=2e-3, teach="full"),
        train=dict(lr=6e-4, prompts=32, steps=20),
    )


def _lossy(name: str, about: str) -> Preset:
    """The look-again PeekRead preset (issue 32): ReSum's frozen summariser loses the fact, and the policy can
    read it again.

    The fact opens an observation in the first two steps of 10-12; peeks and reads both show it
    (``read_payoff`` 0) and every later read restates it (``reread``). A skimmer compacts about twice and a
    reader about four times (W = 40, L = 32, S = 6), so each route crosses summaries; how many of them lose
    the fact is ``harness.summariser_loss``, a setting of the run, not of the preset. With a lossless
    summariser both routes succeed alike; with a lossy one a policy that reads when its context lacks the
    fact (the oracle's route) recovers what the summary lost. Reference agents under ReSum's harness
    (threshold 0.8 W, no tail, 512 episodes): at loss 0 / 0.5 / 0.8 the scripted agent (a coin between
    the routes) 0.81 / 0.54 / -, always-read 0.75 / 0.62 / 0.54, always-peek 0.77 / 0.38 / 0.22, the oracle
    1.00 / 0.85 / 0.79. The solvers guess when the discard rule drops the query's step; a policy can answer
    the value it holds instead.
    """
    return Preset(
        name, _PR,
        PeekReadConfig(vocab_size=26, horizon=(10, 12), obs_tokens=(3, 4), read_tokens=(8, 10), hard_frac=0.0,
                       read_payoff=0.0, reread=True),
        dict(window=40, frac=0.8, summary_tokens=2, tail_steps=0, max_compactions=6, max_steps=30),
        about,
        policy=dict(n_layer=2, n_head=4, d_model=64),
        base=dict(steps=200, episodes=64, lr=1e-3),
        train=dict(lr=6e-4, prompts=32, steps=40),
    )


def _cued(name: str, cue_at: str, about: str, *, distractors: bool = True, **summary: int) -> Preset:
    """The cue family (issue 42): three facts in the first three steps, the cue of reliability 1 where
    ``cue_at`` says, one or two compactions after them; a one-pair summary unless ``summary`` sets a budget.

    The base model clones ``any_fact`` (pairs, but no view on which one) and the RL settings are
    keyrecall-duo's (80 steps, lr 1e-3), where copying pairs learnt from reward.
    """
    return Preset(
        name, _KR,
        KeyRecallConfig(num_facts=3, horizon=(8, 10), vocab_size=28, obs_tokens=(3, 5), hard_frac=0.0,
                        fact_frac=0.25, zipf=0.0, cue_reliability=1.0, cue_at=cue_at, distractors=distractors),
        dict(window=48, frac=0.8, **(summary or {"summary_tokens": 2}), tail_steps=1, max_compactions=6,
             max_steps=16),
        about,
        policy=dict(n_layer=2, n_head=4, d_model=64),
        base=dict(teacher="any_fact", steps=300, episodes=64, lr=1e-3),
        train=dict(lr=1e-3, prompts=32, steps=80),
    )


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("keyrecall-tiny", _KR, KeyRecallConfig(),
               dict(window=96, frac=0.8, summary_tokens=6, tail_steps=1, max_compactions=6, max_steps=40),
               "6 facts, a 3-fact summary, ~2-3 compactions per rollout"),
        Preset("keyrecall-mini", _KR,
               KeyRecallConfig(num_facts=1, horizon=(8, 10), vocab_size=24, obs_tokens=(3, 5), hard_frac=0.0,
                               fact_frac=0.25),
               # CompactionRL's geometry (k = 2 tail steps, S = 3, T_comp = W / 6) does not fit W = 32:
               # every one of its rollouts is overlong there; it needs W >= 64 (docs/training.md, "Demo")
               dict(window=32, frac=0.8, summary_tokens=2, tail_steps=1, max_compactions=6, max_steps=16),
               "the demo preset: 1 fact in the first 2 steps, a 1-pair summary, 2-3 compactions",
               # 80 behaviour-cloning steps give a summariser that keeps the fact part of the time:
               # competent but imperfect, the start RL needs (docs/training.md, "The demo preset")
               policy=dict(n_layer=2, n_head=4, d_model=64),
               base=dict(steps=80, episodes=64, lr=1e-3),
               # lr 3e-3 undoes the base model within a few steps; 6e-4 with 256 rollouts per step
               # improves it (docs/training.md, "The demo preset")
               train=dict(lr=6e-4, prompts=32, steps=40)),
        Preset("keyrecall-duo", _KR,
               KeyRecallConfig(num_facts=2, horizon=(8, 10), vocab_size=24, obs_tokens=(3, 5), hard_frac=0.0,
                               fact_frac=0.25, zipf=0.0),
               # W = 48: one compaction, so the one summary must carry both pairs (at W = 36 re-summarising
               # the summary loses the second pair, and RL gained +1.7 points in 20 steps)
               dict(window=48, frac=0.8, summary_tokens=4, tail_steps=1, max_compactions=6, max_steps=16),
               "two facts in the first two steps, either may be asked: the summary must carry both pairs",
               policy=dict(n_layer=2, n_head=4, d_model=64),
               base=dict(steps=300, episodes=64, lr=1e-3),
               # copying the second pair is slow to learn from reward: lr 1e-3 for 80 steps (+11.5 points)
               train=dict(lr=1e-3, prompts=32, steps=80)),
        _cued("keyrecall-cue", "prompt", "three facts, a cue in the prompt names the one asked "
               "(task.cue_reliability), a one-pair summary"),
        # the same lookup without distractors (issue 50): no key id in the prompt's count or the filler, so the
        # only key ids a context holds are the facts', the cue's and the query's
        _cued("keyrecall-cue-clean", "prompt", "keyrecall-cue without distractors (task.distractors = false): "
              "the prompt cue as a plain lookup", distractors=False),
        _cued("keyrecall-mark", "fact", "three facts, the asked one stated as CUE key value "
               "(task.cue_reliability), a one-pair summary"),
        # variable-length summaries of up to 7 tokens: room for all three pairs and the end token, so the
        # length is the policy's choice (the teacher keeps every fact it has seen)
        _cued("keyrecall-mark-budget", "fact", "keyrecall-mark with variable-length summaries (budget 7): how "
              "long a summary is, RL decides", summary_budget=7),
        Preset("keyrecall-heavy", _KR,
               KeyRecallConfig(horizon=(20, 28), tail_prob=0.08, tail_tokens=40),
               dict(window=128, frac=0.75, summary_tokens=6, tail_steps=1, max_compactions=8, max_steps=48),
               "heavy-tail observations of 40 tokens: the discard rule matters"),
        Preset("keyrecall-corr-pos", _KR, KeyRecallConfig(compaction_reward_corr=0.8),
               dict(window=96, frac=0.8, summary_tokens=6, tail_steps=1, max_compactions=8, max_steps=40),
               "easy instances get padded: more compactions go with success"),
        Preset("keyrecall-corr-neg", _KR, KeyRecallConfig(compaction_reward_corr=-0.8),
               dict(window=96, frac=0.8, summary_tokens=6, tail_steps=1, max_compactions=8, max_steps=40),
               "hard instances get padded: more compactions go with failure (the seed's bad case)"),
        Preset("pointerchase-tiny", _PC, PointerChaseConfig(),
               dict(window=96, frac=0.8, summary_tokens=4, tail_steps=1, max_compactions=8, max_steps=40),
               "12 nodes, 2 links per table, 16-24 moves, a 4-token state summary"),
        _peekread("peekread-pos", 1.0, 300, "reading pays: rollouts that read more compact more and succeed more"),
        _peekread("peekread-neg", -0.2, 120, "reading is a trap: rollouts that read more compact more and fail more"),
        _peekread("peekread-zero", 0.0, 120, "the control: reading costs context and changes nothing else"),
        _routes("peekread-routes-control", "two routes, K free of reward under the trained policy", coupling=-0.05),
        _routes("peekread-routes-c0", "two routes, c = 0: the learned answer makes burst readers fail a little more",
                coupling=0.0),
        _routes("peekread-routes-c25", "two routes, a burst read loses the fact 25% of the time", coupling=0.25),
        _routes("peekread-routes-c50", "two routes, a burst read loses the fact 50% of the time", coupling=0.5),
        _routes("peekread-routes-c100", "two routes, a burst read always loses the fact", coupling=1.0),
        _routes("peekread-routes-pos", "two routes, a short read loses the fact: bursts go with success",
                coupling=-0.5),
        # winners compact more (issue 29, finding 1 where the seed's example lives): a burst reader keeps the
        # fact and compacts K - 1 times; a read without a burst loses it (c = -1) and a peek never shows it,
        # so in a group the rollouts with K segments are the winners and a row-level baseline sits above the
        # rollout-level one. With read_payoff 0.75 (peeks show the fact a quarter of the time) seed 91's
        # K = 8 policy barely learnt (0.49 -> 0.50 in 20 steps; baseline shift 0.19 at step 0, corr(K, R)
        # +0.52) and K = 4 gave a shift of 0.13; hence read_payoff 1 and K = 8 only
        _routes("peekread-winners-k1", "winners family, the control: no bursts, every rollout one segment",
                coupling=-1.0, burst_prob=0.0, burst_steps=7, max_compactions=8, horizon=(11, 11), read_payoff=1.0),
        _routes("peekread-winners-k8", "winners family: a burst reader keeps the fact in K = 8 segments, a plain "
                "read or a peek loses it", coupling=-1.0, burst_steps=7, max_compactions=8, horizon=(11, 11),
                read_payoff=1.0),
        _long_k("peekread-long-k1", "long-K family, the control: no bursts, every rollout one segment", 2, 0.0),
        _long_k("peekread-long-k2", "long-K family: a reader compacts once (K = 2)", 1),
        _long_k("peekread-long-k4", "long-K family: a reader compacts three times (K = 4)", 3),
        _long_k("peekread-long-k8", "long-K family: a reader compacts seven times (K = 8)", 7),
        _routes("peekread-overlong-0", "overlong family, the control: burst readers (p = 0.3) fit S = 2",
                coupling=-0.05, burst_prob=0.3, max_compactions=2),
        _routes("peekread-overlong-10", "overlong family: burst readers (p = 0.1) run out of S = 1",
                coupling=-0.05, burst_prob=0.1, max_compactions=1),
        _routes("peekread-overlong-30", "overlong family: burst readers (p = 0.3) run out of S = 1",
                coupling=-0.05, burst_prob=0.3, max_compactions=1),
        _overread("peekread-overread", "over-read: reading on past the fact needs a second compaction and S = 1 "
                  "allows one, so overlong is the policy's choice", window=36),
        _lossy("peekread-lossy", "look again: a read restates the fact a lossy frozen summariser dropped"),
        Preset("pointerchase-long", _PC, PointerChaseConfig(horizon=(32, 48)),
               dict(window=128, frac=0.8, summary_tokens=4, tail_steps=1, max_compactions=10, max_steps=64),
               "32-48 moves: credit must cross many segments"),
    )
}


PRESET_NAMES = Annotated[str, Names(lambda: PRESETS)]
"""The rule of ``task.preset``: a preset's name."""


def get_preset(name: str, key: str = "task.preset") -> Preset:
    """The preset called ``name``; an unknown name (or a value that is no name) lists the valid ones."""
    return PRESETS[check_value(key, name, PRESET_NAMES)]
