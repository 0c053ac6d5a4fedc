"""The policy network: a small decoder-only transformer (nanoGPT style) with an LM head and a value head.

This module owns the config, the layers, the key/value cache layout and the two ways to run the
trunk: over whole right-padded sequences (training, full recompute) and incrementally against a
:class:`KVCache` (rollouts). Sampling, phase masks and the per-environment decoding loop live in
``simlab.policy.decode``; checkpoints in ``simlab.policy.checkpoint``.

Conventions: batch-first, ``B`` rows, ``T`` tokens, ``C = d_model``, ``H`` heads of size ``D``,
``V`` vocabulary entries, ``S`` cache slots. Sequences are right-padded; a token's position is its
index within its own row, so ragged rows need no left padding and no position offsets.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from simlab.policy.config import PolicyConfig
from simlab.policy.device import autocast

Ints = Tensor | np.ndarray
"""Row indices or counts: a tensor, or (to keep a CUDA stream free of read-backs) host memory."""


class KVCache:
    """Keys and values of every layer for ``B`` rows, each row holding its own number of tokens.

    Row ``b`` keeps its tokens in slots ``0 .. lengths[b]-1`` of ``(B, H, S, D)`` buffers, the layout
    attention reads fastest (at a 256-token span a ``(B, S, H, D)`` one made decoding 1.7x slower);
    slot ``S-1 = max_len`` is a trash slot that padded (non-)tokens of a ragged append write to, so
    that one write serves every row and no valid slot is ever overwritten. Buffers start at zero so
    that masked slots never hold NaN (a masked key has weight 0, but 0 * NaN would still poison the
    output); slots past a row's length keep whatever finite values an earlier segment left there,
    which masking ignores exactly.

    ``lengths`` is kept in host memory: shapes and bounds are decided there, and the positions an
    append writes go to the device with its tokens, so decoding never reads the device back.
    """

    def __init__(self, cfg: PolicyConfig, batch_size: int, device: torch.device, dtype: torch.dtype) -> None:
        head_dim = cfg.d_model // cfg.n_head
        shape = (batch_size, cfg.n_head, cfg.max_len + 1, head_dim)  # (B, H, S, D)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layer)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(cfg.n_layer)]
        self.lengths = np.zeros(batch_size, dtype=np.int64)  # (B,)
        self.max_len = cfg.max_len

    @property
    def batch_size(self) -> int:
        """Rows the cache holds."""
        return int(self.lengths.shape[0])

    @property
    def trash_slot(self) -> int:
        """The slot padded (non-)tokens of a ragged append are written to: ``max_len``."""
        return self.max_len

    def flat_slots(self, rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """(A * T * H,) indices into a buffer viewed as (B * H * S, D) of each token's slot in each head,
        for rows (A,) and slots (A, T): a write then copies whole D-vectors (``index_copy_``)."""
        _, H, S, _ = self.k[0].shape
        index: np.ndarray = (rows[:, None, None] * H + np.arange(H)[None, None, :]) * S + slots[:, :, None]
        return index.reshape(-1)

    def write(self, layer: int, step: CachedStep, k: Tensor, v: Tensor) -> None:
        """Store the new tokens' keys and values, each (A, T, H, D), at ``step``'s slots."""
        for buf, new in ((self.k[layer], k), (self.v[layer], v)):
            D = buf.shape[-1]
            buf.view(-1, D).index_copy_(0, step.slots, new.reshape(-1, D).to(buf.dtype))

    def read(self, layer: int, rows: Tensor | None, span: int) -> tuple[Tensor, Tensor]:
        """Keys and values of slots ``[0, span)`` of ``rows`` (all rows when None), each (R, H, span, D)."""
        k, v = self.k[layer][:, :, :span], self.v[layer][:, :, :span]  # (B, H, span, D)
        if rows is None:
            return k, v
        return k.index_select(0, rows), v.index_select(0, rows)  # several times faster than k[rows]


class CachedStep(NamedTuple):
    """Where the tokens of one cached append go, computed once and shared by every layer."""

    rows: Tensor | None
    """(A,) cache rows the appended tokens belong to; None: every row, in order."""
    slots: Tensor
    """(A * T * H,) where each token's key and value go in each head (:meth:`KVCache.flat_slots`):
    its position, or the trash slot for padding."""
    mask: Tensor
    """(A, 1, T, span) True where a query may attend to a key slot (key slot <= query position)."""


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention, over a whole sequence or against a KV cache."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.dropout = cfg.dropout
        self.resid_drop = nn.Dropout(cfg.dropout)
        self.fused = cfg.fused_attention

    def forward(
        self, x: Tensor, cache: KVCache | None = None, layer: int = 0, step: CachedStep | None = None
    ) -> Tensor:
        """Causal self-attention over ``x`` (B, T, C); with a cache, over the cached keys too."""
        B, T, C = x.shape
        qkv = self.qkv(x)  # (B, T, 3C)
        q = qkv[..., :C].view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, D)
        mask: Tensor | None = None
        if cache is None:
            k = qkv[..., C : 2 * C].view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
            v = qkv[..., 2 * C :].view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        else:
            assert step is not None
            # (B, T, C) -> (B, T, H, D): the order a write to (row, slot) pairs takes
            cache.write(layer, step, qkv[..., C : 2 * C].view(B, T, self.n_head, C // self.n_head),
                        qkv[..., 2 * C :].view(B, T, self.n_head, C // self.n_head))
            k, v = cache.read(layer, step.rows, step.mask.shape[-1])  # (B, H, span, D)
            k, v, mask = k.to(q.dtype), v.to(q.dtype), step.mask
        y = self._attend(q, k, v, mask)  # (B, H, T, D)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # (B, T, C)
        out: Tensor = self.resid_drop(self.proj(y))
        return out

    def _attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """softmax(q k^T / sqrt(D)) v with ``mask`` (True = attend), or plain causal when it is None."""
        p_drop = self.dropout if self.training else 0.0
        if self.fused:
            return F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=p_drop, is_causal=mask is None
            )
        T, S = q.shape[-2], k.shape[-2]
        if mask is None:
            mask = torch.ones(T, S, dtype=torch.bool, device=q.device).tril()  # (T, S), T == S here
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T, S)
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        att = F.dropout(att, p=p_drop, training=self.training)
        return att @ v  # (B, H, T, D)


class MLP(nn.Module):
    """Position-wise feed-forward: C -> 4C -> C with GELU."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.proj = nn.Linear(4 * cfg.d_model, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)

    def forward(self, x: Tensor) -> Tensor:
        """dropout(proj(gelu(fc(x)))), shape-preserving (B, T, C)."""
        out: Tensor = self.drop(self.proj(F.gelu(self.fc(x))))
        return out


class Block(nn.Module):
    """Pre-LN transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.d_model)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.d_model)
        self.mlp = MLP(cfg)

    def forward(
        self, x: Tensor, cache: KVCache | None = None, layer: int = 0, step: CachedStep | None = None
    ) -> Tensor:
        """x + attn(ln(x)), then x + mlp(ln(x)); with a cache, the attention appends to it."""
        x = x + self.attn(self.ln_1(x), cache, layer, step)
        out: Tensor = x + self.mlp(self.ln_2(x))
        return out


class PolicyOutput(NamedTuple):
    """What a forward pass gives: next-token logits at every position, and the values."""

    logits: Tensor
    """(B, T, V) fp32 next-token logits at every position (unmasked)."""
    values: Tensor | None
    """(B, T) fp32 value of the state after reading tokens[:, :t+1]; None without a value head."""


class Policy(nn.Module):
    """Decoder-only transformer: token + learned position embeddings, pre-LN blocks, LM and value heads.

    The LM head shares its weight with the token embedding (as nanoGPT does). Phase masks are not
    applied here: :func:`simlab.policy.decode.masked_log_softmax` applies them to these logits.
    """

    def __init__(self, cfg: PolicyConfig) -> None:
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.wpe = nn.Embedding(cfg.max_len, cfg.d_model)
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.wte.weight
        self.value = nn.Linear(cfg.d_model, 1) if cfg.value_head else None
        self.apply(self._init_weights)
        # GPT-2: scale residual projections by 1/sqrt(2 * n_layer) so the stream's variance stays O(1).
        for name, p in self.named_parameters():
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    @property
    def device(self) -> torch.device:
        """The device the parameters live on."""
        return self.wte.weight.device

    def num_parameters(self) -> int:
        """Trainable parameters, the tied embedding counted once."""
        return sum(p.numel() for p in self.parameters())

    def forward_flops(self, tokens: float, keys: float) -> float:
        """Forward FLOPs of ``tokens`` tokens through the trunk attending to ``keys`` keys in all.

        2 per weight-matrix entry of the blocks per token, plus 4 C per attended key per layer
        (``q k^T`` and the weighted sum of ``v``). Embedding lookups, biases, norms and the heads are
        left out: lookups and elementwise work, and the heads run on a few positions per call while
        rolling out. A training pass costs about 3 forwards (the backward computes two products).
        """
        weights = sum(p.numel() for p in self.blocks.parameters() if p.dim() == 2)
        return 2.0 * weights * tokens + 4.0 * self.config.d_model * self.config.n_layer * keys

    # ------------------------------------------------------------------ heads
    def heads(self, h: Tensor) -> PolicyOutput:
        """LM logits and values from final hidden states ``h`` (..., C); both returned in fp32."""
        logits = self.lm_head(h).float()
        values = self.value(h).squeeze(-1).float() if self.value is not None else None
        return PolicyOutput(logits, values)

    # ------------------------------------------------------------------ full sequences
    def forward(self, tokens: Tensor) -> PolicyOutput:
        """Logits and values at every position of right-padded rows ``tokens`` (B, T).

        No padding mask is needed: attention is causal and padding comes after every valid token,
        so a valid position never sees padding. Outputs at padded positions are meaningless and must
        be masked by the caller's ``(B, T)`` loss mask (1 = counts).
        """
        T = tokens.shape[1]
        if tokens.shape[1] > self.config.max_len:
            raise ValueError(f"sequence of {T} tokens exceeds policy.max_len={self.config.max_len}")
        with autocast(tokens.device, self.config.bf16):
            pos = torch.arange(T, device=tokens.device)  # (T,)
            x = self.drop(self.wte(tokens) + self.wpe(pos))  # (B, T, C)
            for block in self.blocks:
                x = block(x)
            return self.heads(self.ln_f(x))

    # ------------------------------------------------------------------ incremental decoding
    def new_cache(self, batch_size: int) -> KVCache:
        """An empty cache for ``batch_size`` rows, in the dtype the trunk's activations will have."""
        dtype = torch.bfloat16 if (self.config.bf16 and self.device.type == "cuda") else torch.float32
        return KVCache(self.config, batch_size, self.device, dtype)

    def forward_cached(
        self,
        tokens: Tensor,
        n_new: Ints,
        cache: KVCache,
        rows: Ints | None = None,
        span: int | None = None,
    ) -> Tensor:
        """Append ``n_new[a]`` tokens to cache row ``rows[a]`` and return their final hidden states.

        Args:
            tokens: (A, T) right-padded new tokens; entries at ``t >= n_new[a]`` are ignored.
            n_new: (A,) how many of each row's tokens are real (0 leaves the row untouched); read on
                the host, so pass host memory to keep a CUDA stream free of syncs.
            cache: holds each row's earlier tokens; updated in place (keys, values and lengths).
            rows: (A,) distinct cache rows, in host memory; None means every row in order (A = B).
                Only these rows are computed: idle rows cost nothing.
            span: key slots attention reads, at least the longest of ``rows`` after the append
                (the default). The attention kernel's rounding depends on it, so a caller that must
                reproduce another batching's results bit for bit passes that batching's span.

        Returns:
            (A, T, C) hidden states after the final LayerNorm; rows past ``n_new`` hold garbage.
        """
        A, T = tokens.shape
        index = np.arange(cache.batch_size) if rows is None else host_ints(rows)
        counts = host_ints(n_new)
        if index.shape != (A,) or counts.shape != (A,):
            raise ValueError(f"tokens have {A} rows but rows/n_new have shapes {index.shape}/{counts.shape}")
        new_lengths = cache.lengths[index] + counts  # (A,)
        check_room(index, new_lengths, self.config.max_len)
        longest = int(new_lengths.max()) if A > 0 else 0
        span = max(longest, 1) if span is None else span
        # where each token goes, worked out in host memory and sent with the tokens
        pos = cache.lengths[index][:, None] + np.arange(T)[None, :]  # (A, T)
        valid = np.arange(T)[None, :] < counts[:, None]  # (A, T)
        mask = (np.arange(span)[None, None, :] <= pos[:, :, None])[:, None]  # (A, 1, T, span)
        device = tokens.device
        step = CachedStep(
            rows=None if rows is None else to_device(device, index),
            slots=to_device(device, cache.flat_slots(index, np.where(valid, pos, cache.trash_slot))),
            mask=to_device(device, mask),
        )
        # Padding gets token 0 at position 0: any in-range ids keep its (ignored) activations finite.
        safe_tokens = torch.where(to_device(device, valid), tokens, 0)
        safe_pos = to_device(device, np.where(valid, pos, 0))
        with autocast(device, self.config.bf16):
            x = self.drop(self.wte(safe_tokens) + self.wpe(safe_pos))  # (A, T, C)
            for layer, block in enumerate(self.blocks):
                x = block(x, cache, layer, step)
            h: Tensor = self.ln_f(x)
        cache.lengths[index] = new_lengths
        return h


def check_room(rows: np.ndarray, lengths: np.ndarray, max_len: int) -> None:
    """Raise unless every row ``rows[i]`` can hold ``lengths[i]`` tokens."""
    if bool((lengths > max_len).any()):
        raise ValueError(f"rows {rows[lengths > max_len].tolist()} would hold more than policy.max_len={max_len} "
                         "tokens; compact or re-prefill them first")


def to_device(device: torch.device, array: np.ndarray) -> Tensor:
    """A host array on ``device``; the copy does not wait for the device (pageable memory is staged)."""
    return torch.from_numpy(np.ascontiguousarray(array)).to(device, non_blocking=True)


def host_ints(values: Ints) -> np.ndarray:
    """An int64 numpy copy of ``values``; a device tensor is read back (a sync), so pass host memory."""
    if isinstance(values, Tensor):
        values = values.detach().cpu().numpy()
    return np.asarray(values, dtype=np.int64).reshape(-1)


def critic_from(policy: Policy) -> Policy:
    """A separate critic initialised from ``policy``'s weights, as CompactionRL does.

    The copy always has a value head: the policy's own when it has one, a fresh one otherwise. It
    shares no parameters with ``policy``, so the critic's optimiser and learning rate are its own.
    The LM head comes along unused; it is cheap at this scale and keeps the checkpoint format one.
    """
    cfg = policy.config
    critic = Policy(cfg.replace(value_head=True)).to(policy.device)
    missing, unexpected = critic.load_state_dict(policy.state_dict(), strict=False)
    assert not unexpected, unexpected
    assert all(k.startswith("value.") for k in missing), missing
    return critic
