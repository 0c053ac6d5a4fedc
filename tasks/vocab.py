"""The shared token vocabulary: reserved special tokens, content tokens and the versioned ``v_sum``.

Every task, the harness and every agent speak this one vocabulary. Ids below ``FIRST_CONTENT`` are
reserved; a task of vocabulary size ``V`` owns the content ids ``FIRST_CONTENT .. V-1``.
"""

from __future__ import annotations

from typing import Final

PAD: Final = 0
"""Padding. Observations are right-padded with it; the harness strips it."""
END_SUMMARY: Final = PAD
"""Ends a variable-length summary (``harness.summary_budget``): the summariser's last token, scored like
the others; the next segment holds the summary without it. A fixed-length summary may contain it as
filler."""
BOS: Final = 1
"""Start of every working context (the harness writes it before the task prompt)."""
ACT: Final = 2
"""Harness marker before an agent action; the agent generates the next token."""
OBS: Final = 3
"""Harness marker before the observation tokens of a step."""
ANSWER: Final = 4
"""Harness marker before the final answer token."""
QUERY: Final = 5
"""Written by a task as the last token of an observation: the next action is the answer."""
COMPACT: Final = 6
"""An action the agent may emit under the ``policy`` trigger: compact now (never sent to the env)."""
SUMMARY: Final = 7
"""Harness marker opening the summary block at the start of a new segment."""
VSUM: Final = 8
"""First token of the summarisation instruction ``v_sum``; the second token is its version."""
NEXT: Final = 9
"""A task's "read on" action (KeyRecall streams facts while the agent answers NEXT)."""
FACT: Final = 10
"""Task marker: ``FACT key value`` states a fact (KeyRecall)."""
LINK: Final = 11
"""Task marker: ``LINK a b`` says node ``a`` points to node ``b`` (PointerChase)."""
CUE: Final = LINK
"""KeyRecall with ``cue_at = "fact"``: ``CUE key value`` states the cued fact (``FACT`` states the others).
It shares LINK's id: no task uses both."""
TASK: Final = 12
"""Task marker opening a prompt."""
_VERSION_TOKENS: Final = {"v1": 13, "v2": 14, "v3": 15}

FIRST_CONTENT: Final = 16
"""The first content id; every id from here to ``vocab_size - 1`` is task data."""

SPECIAL_NAMES: Final = {
    PAD: "PAD/END_SUMMARY",
    BOS: "BOS",
    ACT: "ACT",
    OBS: "OBS",
    ANSWER: "ANSWER",
    QUERY: "QUERY",
    COMPACT: "COMPACT",
    SUMMARY: "SUMMARY",
    VSUM: "VSUM",
    NEXT: "NEXT",
    FACT: "FACT",
    LINK: "LINK/CUE",
    TASK: "TASK",
    13: "V1",
    14: "V2",
    15: "V3",
}

V_SUM_VERSIONS: Final = tuple(_VERSION_TOKENS)
"""Known ``v_sum`` versions. A checkpoint records the version it was trained with."""


def v_sum(version: str = "v1") -> tuple[int, ...]:
    """The summarisation instruction tokens of ``version`` (``|v_sum| = 2``)."""
    if version not in _VERSION_TOKENS:
        raise ValueError(f"`harness.v_sum={version!r}` is invalid; choose one of {V_SUM_VERSIONS}")
    return (VSUM, _VERSION_TOKENS[version])


def describe(tokens: list[int] | tuple[int, ...]) -> str:
    """Human-readable rendering: special tokens by name (an id two markers share by both, ``LINK/CUE``: no
    task uses both, so the task says which), content tokens as ``c<k>``."""
    return " ".join(SPECIAL_NAMES.get(int(t), f"c{int(t) - FIRST_CONTENT}") for t in tokens)
