"""PolicyAgent: the transformer policy behind the harness's agent protocol, with a KV cache per env.

The harness sends whole working contexts. Between two requests an env's context usually grows by the
tokens the agent generated plus an observation, so the agent keeps one cache row per env and only
appends the new suffix. When a compaction starts a new segment the context is no longer an extension
of what the row holds, and that row is re-prefilled (``Decoder.reset_rows``); the other rows keep
their cache.
"""

from __future__ import annotations

import time

import numpy as np
import torch
from torch import Tensor

from simlab.errors import TrainingDiverged
from simlab.harness.protocol import Generation, Request
from simlab.policy.decode import Decoder, draw
from simlab.policy.model import Policy

NON_FINITE = "the policy produced non-finite logits during a rollout"


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
        self.model_seconds = 0.0
        """Wall time spent in the policy (trunk, heads, sampling); the rest of a request is glue. On
        CUDA the kernels land in it too, since every request ends by reading its tokens back."""

    def _count(self, start: int, n: int) -> None:
        """Account for ``n`` tokens appended to a row that held ``start`` tokens."""
        self.prefilled_tokens += n
        self.attended_keys += n * start + n * (n + 1) // 2

    def _sync(self, rows: np.ndarray, contexts: list[np.ndarray]) -> None:
        """Make cache row ``rows[i]`` hold exactly ``contexts[i]``: append the suffix, or re-prefill."""
        grow_rows: list[int] = []
        grow_ctx: list[np.ndarray] = []
        reset_rows: list[int] = []
        reset_ctx: list[np.ndarray] = []
        for r, ctx in zip(rows.tolist(), contexts, strict=True):
            held = self.held[r]
            if held is not None and held.size < ctx.size and bool((ctx[: held.size] == held).all()):
                grow_rows.append(r)
                grow_ctx.append(ctx[held.size :])
                self._count(held.size, ctx.size - held.size)
            else:
                reset_rows.append(r)
                reset_ctx.append(ctx)
                self._count(0, ctx.size)
            self.held[r] = ctx
        start = time.perf_counter()
        if reset_rows:
            self.decoder.reset_rows(np.asarray(reset_rows, dtype=np.int64), *_right_pad(reset_ctx))
            self.reset_count += len(reset_rows)
        if grow_rows:
            self.decoder.extend(*_right_pad(grow_ctx), rows=np.asarray(grow_rows, dtype=np.int64))
        self.model_seconds += time.perf_counter() - start

    @torch.no_grad()
    def generate(self, request: Request) -> Generation:
        """Tokens for every environment in ``request``: one batched, KV-cached decode over the rows."""
        rows = np.asarray(request.env_ids, dtype=np.int64)
        contexts = [np.asarray(c, dtype=np.int64) for c in request.contexts]
        allowed_host = np.asarray(request.allowed, dtype=np.bool_)
        n, k = rows.size, request.num_tokens
        if not allowed_host.any():
            raise ValueError(f"allowed masks of rows {list(range(n))} allow no token; every row needs at least one")
        self._sync(rows, contexts)
        start = time.perf_counter()
        device = self.policy.device
        idx = torch.from_numpy(rows).to(device, non_blocking=True)
        allowed = torch.from_numpy(allowed_host).to(device, non_blocking=True)[None, :].expand(n, -1)
        held_keys = sum(c.size for c in contexts)
        columns: list[Tensor] = []  # per token: (n, 3) token id, log-prob, value, all on the device
        finite: list[Tensor] = []
        stop = _Stop(request.stop_token, n, allowed)
        for j in range(k):
            logits = self._checked(self.decoder.logits[idx], finite)  # (n, V)
            tok, lp = draw(logits, stop.allowed(allowed), temperature=self.temperature, generator=self.generator,
                           greedy=self.greedy)
            value = self.decoder.values[idx] if self.policy.value is not None else torch.zeros_like(lp)
            columns.append(torch.stack([tok.double(), lp.double(), value.double()], dim=-1))
            self.decoder.append_sampled(rows, tok)
            self.prefilled_tokens += n
            self.attended_keys += held_keys + n * (j + 1)  # row i's token attends to its context + j + 1
            if stop.every_row_ended(tok):
                break
        out = torch.stack(columns, dim=1).cpu().numpy()  # (n, k', 3): the request's one read-back
        if finite and not bool(torch.stack(finite).all()):
            raise TrainingDiverged(NON_FINITE)
        self.model_seconds += time.perf_counter() - start
        tokens = out[..., 0].astype(np.int64)
        for i, r in enumerate(rows.tolist()):
            self.held[r] = np.concatenate([contexts[i], tokens[i]])
        out = stop.fill(out, k)
        tokens = out[..., 0].astype(np.int64)
        return Generation(tokens=tokens, logprobs=out[..., 1],
                          values=out[..., 2] if self.policy.value is not None else None)

    @staticmethod
    def _checked(logits: Tensor, flags: list[Tensor]) -> Tensor:
        """``logits`` if finite. The CPU checks at once; CUDA keeps the flag for one check per request
        (a per-token check would stall the stream) and samples from zeros in the meantime."""
        ok = torch.isfinite(logits).all()
        if logits.device.type == "cpu":
            if not bool(ok):
                raise TrainingDiverged(NON_FINITE)
            return logits
        flags.append(ok)
        return torch.nan_to_num(logits, nan=0.0, posinf=0.0, neginf=0.0)


class _Stop:
    """A variable-length request's end token (``Request.stop_token``): once a row has emitted it, the row
    may only repeat it (log-prob 0), and on the CPU decoding ends when every row has; ``None`` changes
    nothing. On CUDA the request runs its whole budget instead: asking whether every row has ended would
    read the device back once per token, the stall a request otherwise avoids (``_checked``)."""

    def __init__(self, token: int | None, n: int, allowed: Tensor) -> None:
        self.token = token
        self.early = allowed.device.type == "cpu"
        if token is None:  # every action and answer request: nothing to allocate
            return
        self.ended = torch.zeros(n, dtype=torch.bool, device=allowed.device)
        self.only = torch.zeros_like(allowed[:1])  # (1, V)
        self.only[0, token] = True

    def allowed(self, allowed: Tensor) -> Tensor:
        """(n, V) each row's mask: the phase's, or only the end token once the row has ended."""
        return allowed if self.token is None else torch.where(self.ended[:, None], self.only, allowed)

    def every_row_ended(self, tokens: Tensor) -> bool:
        """Note the rows that emitted the end token; True once all have (one read-back per token)."""
        if self.token is None:
            return False
        self.ended |= tokens == self.token
        return self.early and bool(self.ended.all())

    def fill(self, out: np.ndarray, k: int) -> np.ndarray:
        """(n, k, 3): ``out`` (n, k' <= k, 3) with the columns decoding skipped as the end token, log-prob 0."""
        if out.shape[1] == k:
            return out
        rest = np.zeros((out.shape[0], k - out.shape[1], 3))
        rest[..., 0] = self.token
        return np.concatenate([out, rest], axis=1)
