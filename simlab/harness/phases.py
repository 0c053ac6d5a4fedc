"""Phase masks: which tokens an agent may produce in each phase of the token protocol.

The harness applies them when it asks an agent for tokens; the trainer applies the same table when
it rescores those tokens, so a rollout's distribution and the one the update optimises are built
from one definition.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simlab.arrays import BoolArray
from simlab.harness.protocol import Phase
from simlab.harness.triggers import TRIGGERS
from simlab.tasks import vocab


def protocol_metadata(env: Any) -> dict[str, Any]:
    """The token-protocol metadata of a (vector) env: act/answer token sets, prompt and step sizes."""
    meta = dict(getattr(env, "metadata", {}) or {})
    if "act_tokens" not in meta and hasattr(env, "envs"):  # SyncVectorEnv over a user's single env
        meta = {**getattr(env.envs[0].unwrapped, "metadata", {}), **meta}
    return meta


def phase_masks(env: Any, trigger: str) -> dict[str, BoolArray]:
    """``{"act", "act_compact", "summary", "answer"}`` -> (V,) allowed-token masks for ``env``."""
    vocab_size = int(env.single_action_space.n)
    meta = protocol_metadata(env)
    content = np.zeros(vocab_size, dtype=np.bool_)
    content[vocab.FIRST_CONTENT:] = True
    act = np.zeros(vocab_size, dtype=np.bool_)
    act[np.asarray(meta.get("act_tokens", np.flatnonzero(content)))] = True
    act_compact = act.copy()
    if TRIGGERS.get(trigger).agent_compacts:
        act_compact[vocab.COMPACT] = True
    answer = np.zeros(vocab_size, dtype=np.bool_)
    answer[np.asarray(meta.get("answer_tokens", np.flatnonzero(content)))] = True
    summary = content.copy()
    summary[vocab.PAD] = True
    return {"act": act, "act_compact": act_compact, "summary": summary, "answer": answer}


def phase_table(env: Any, trigger: str) -> BoolArray:
    """(len(Phase), V): row ``p`` is what a token labelled ``Phase(p)`` may be.

    ACT uses the COMPACT-inclusive mask, the union of what the harness offers; CONTEXT allows
    everything (those tokens are never scored).
    """
    masks = phase_masks(env, trigger)
    table = np.ones((len(Phase), masks["act"].size), dtype=np.bool_)
    table[Phase.ACT] = masks["act_compact"]
    table[Phase.SUMMARY] = masks["summary"]
    table[Phase.ANSWER] = masks["answer"]
    return table
