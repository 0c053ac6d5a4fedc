"""PolicyAgent: the transformer policy behind the harness's agent protocol, with a KV cache per env.

The harness sends whole working contexts. Between two requests an env's context usually grows by the
tokens the agent generated plus an observation, so the agent keeps one cache row per env and only
appends the new suffix. When a compaction starts a new segment the context is no longer an extension
of what the row holds, and that row is re-prefilled (``Decoder.reset_rows``); the other rows keep
their cache.
"""

from __future__ import annotations

import numpy as np
import torch

from simlab.harness.protocol import Generation, Request
from simlab.policy.decode import Decoder, sample
from simlab.policy.model import Policy
from simlab.update import TrainingDiverged


def _right_pad(rows: list[np.ndarray]) -> tuple[torch.Tensor, torch.Tensor]:
    """Ragged int rows -> (R, T) int64 tokens right-padded with 0, and (R,) lengths."""
    width = max((r.size for r in rows), default=0)
    tokens = np.zeros((len(rows), max(width, 1)), dtype=np.int64)
    for i, r in enumerate(rows):
        tokens[i, : r.size] = r
    return torch.from_numpy(tokens), torch.tensor([r.size for r in rows], dtype=torch.long)


class PolicyAgent:
    """Samples actions, summaries and answers from a :class:`Policy` for a batch of ``num_envs`` envs."""

    def __init__(
        self,
        policy: Policy,
        num_envs: int,
        *,
        temperature: float = 1.0,
        greedy: bool = False,
        generator: torch.Generator | None = None,
    ) -> None:
        self.policy = policy
        self.decoder = Decoder(policy, num_envs)
        self.held: list[np.ndarray | None] = [None] * num_envs
        """Tokens each cache row currently holds."""
        self.temperature = temperature
        self.greedy = greedy
        self.generator = generator
        self.prefilled_tokens = 0
        """Tokens pushed through the trunk (prefills and appends): the rollout's compute."""
        self.attended_keys = 0
        """Keys the processed tokens attended to (a token at position p attends to p + 1): attention's
        share of the compute, which grows with the context where the token count does not."""
        self.reset_count = 0

    def _count(self, start: int, n: int) -> None:
        """Account for ``n`` tokens appended to a row that held ``start`` tokens."""
        self.prefilled_tokens += n
        self.attended_keys += n * start + n * (n + 1) // 2

    def _sync(self, rows: np.ndarray, contexts: list[np.ndarray]) -> None:
        """Make cache row ``rows[i]`` hold exactly ``contexts[i]``: append the suffix, or re-prefill."""
        B = self.decoder.batch_size
        suffix: list[np.ndarray] = [np.zeros(0, dtype=np.int64)] * B
        reset_rows: list[int] = []
        reset_ctx: list[np.ndarray] = []
        for r, ctx in zip(rows.tolist(), contexts, strict=True):
            held = self.held[r]
            if held is not None and held.size < ctx.size and np.array_equal(ctx[: held.size], held):
                suffix[r] = ctx[held.size :]
                self._count(held.size, ctx.size - held.size)
            else:
                reset_rows.append(r)
                reset_ctx.append(ctx)
                self._count(0, ctx.size)
            self.held[r] = ctx
        if reset_rows:
            tokens, lengths = _right_pad(reset_ctx)
            self.decoder.reset_rows(torch.tensor(reset_rows), tokens, lengths)
            self.reset_count += len(reset_rows)
        if any(s.size for s in suffix):
            tokens, lengths = _right_pad(suffix)
            self.decoder.extend(tokens, lengths)

    @torch.no_grad()
    def generate(self, request: Request) -> Generation:
        rows = np.asarray(request.env_ids, dtype=np.int64)
        contexts = [np.asarray(c, dtype=np.int64) for c in request.contexts]
        self._sync(rows, contexts)
        device = self.policy.device
        idx = torch.from_numpy(rows).to(device)
        allowed = torch.from_numpy(np.asarray(request.allowed, dtype=np.bool_)).to(device)[None, :]
        n, k = rows.size, request.num_tokens
        tokens = np.zeros((n, k), dtype=np.int64)
        logprobs = np.zeros((n, k))
        values = np.zeros((n, k))
        B = self.decoder.batch_size
        held_keys = sum(c.size for c in contexts)
        for j in range(k):
            logits = self.decoder.logits[idx]  # (n, V)
            if not bool(torch.isfinite(logits).all()):
                raise TrainingDiverged("the policy produced non-finite logits during a rollout")
            tok, lp = sample(logits, allowed.expand(n, -1), temperature=self.temperature,
                             generator=self.generator, greedy=self.greedy)
            tokens[:, j] = tok.cpu().numpy()
            logprobs[:, j] = lp.cpu().numpy()
            if self.policy.value is not None:
                values[:, j] = self.decoder.values[idx].cpu().numpy()
            step = torch.zeros(B, dtype=torch.long, device=device)
            step[idx] = tok
            active = torch.zeros(B, dtype=torch.bool, device=device)
            active[idx] = True
            self.decoder.decode_step(step, active)
            self.prefilled_tokens += n
            self.attended_keys += held_keys + n * (j + 1)  # row i's token attends to its context + j + 1
        for i, r in enumerate(rows.tolist()):
            self.held[r] = np.concatenate([contexts[i], tokens[i]])
        return Generation(tokens=tokens, logprobs=logprobs,
                          values=values if self.policy.value is not None else None)
