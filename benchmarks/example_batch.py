"""The small example batch that ``simlab audit-batch`` reads in docs/use-in-verl.md.

A batch shaped as verl 0.9's v1 trainer hands one to ``_compute_advantage``: 8 prompts x 4 sessions,
each session 1 to 3 rows keyed ``{uid}_{session_id}_{index}``, a response mask with tool tokens (0)
between generated ones, and the session's reward on the last generated token of every row (verl's reward
loop copies the final output's score to the others). As on simlab's ``peekread-routes-c100``, the
sessions that split into more rows fail more often (success 0.7 at K = 1, 0.3 at K = 3). Run:

    python benchmarks/example_batch.py [--out benchmarks/example-batch.parquet]

The file is a pure function of the code (a fixed seed); tests/integrations/test_audit_batch.py checks
that the committed one is what this script writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from simlab.integrations.batch_file import write_batch

OUT = Path(__file__).with_name("example-batch.parquet")
PROMPTS, SESSIONS, WIDTH, SEED = 8, 4, 24, 31
SUCCESS_BY_K = {1: 0.7, 2: 0.5, 3: 0.3}


def build(seed: int = SEED) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(keys, response mask, token rewards) of the example batch."""
    rng = np.random.default_rng(seed)
    keys, masks, rewards = [], [], []
    for p in range(PROMPTS):
        for s in range(SESSIONS):
            k = int(rng.integers(1, 4))
            reward = float(rng.random() < SUCCESS_BY_K[k])
            for i in range(k):
                mask = np.zeros(WIDTH)
                mask[: int(rng.integers(4, WIDTH))] = 1
                mask[rng.random(WIDTH) < 0.2] = 0  # tool tokens between generated ones
                mask[0] = 1
                row_reward = np.zeros(WIDTH)
                row_reward[int(np.flatnonzero(mask)[-1])] = reward
                keys.append(f"prompt{p}_{s}_{i}")
                masks.append(mask)
                rewards.append(row_reward)
    return keys, np.asarray(masks, dtype=np.int64), np.asarray(rewards)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    keys, mask, rewards = build()
    print(write_batch(args.out, keys, mask, rewards))


if __name__ == "__main__":
    main()
