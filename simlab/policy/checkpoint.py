"""Policy checkpoints: weights, config, vocabulary size and run metadata (``v_sum`` version, trigger).

A checkpoint is one ``torch.save`` file of plain containers and tensors, so it loads with
``torch.load(..., weights_only=True)`` (no pickled code runs). Writes go to a temporary file in the
same directory and are moved into place with ``os.replace``, which is atomic: a crash leaves either
the old checkpoint or the new one, never a torn file.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from simlab.policy.config import config_from_dict, config_to_dict
from simlab.policy.model import Policy

FORMAT_VERSION = 1
"""Bumped when the layout below changes incompatibly."""

_PLAIN = (str, int, float, bool, type(None))


def _check_plain(value: Any, key: str) -> None:
    """``meta`` must hold only what ``weights_only`` loading accepts back; fail at save time, not load."""
    if isinstance(value, _PLAIN):
        return
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_plain(item, f"{key}[{i}]")
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise ValueError(f"`{key}` has a non-string key {k!r}; checkpoint meta keys must be strings")
            _check_plain(item, f"{key}.{k}")
        return
    raise ValueError(
        f"`{key}={value!r}` is invalid; checkpoint meta holds only str, int, float, bool, None, "
        "lists and dicts of them"
    )


def save_checkpoint(path: str | os.PathLike[str], policy: Policy, *, meta: dict[str, Any]) -> None:
    """Write ``policy`` and ``meta`` (e.g. ``{"v_sum": "v2", "trigger": {...}}``) to ``path`` atomically."""
    _check_plain(meta, "meta")
    payload = {
        "format": FORMAT_VERSION,
        "config": config_to_dict(policy.config),
        "vocab_size": policy.config.vocab_size,
        "meta": meta,
        "state_dict": {k: v.detach().cpu() for k, v in policy.state_dict().items()},
    }
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(payload, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def load_checkpoint(
    path: str | os.PathLike[str],
    *,
    expected_vocab_size: int | None = None,
    expected_meta: dict[str, Any] | None = None,
    device: torch.device | str | None = None,
) -> tuple[Policy, dict[str, Any]]:
    """Load a policy saved by :func:`save_checkpoint`; returns ``(policy, meta)``.

    Args:
        path: the checkpoint file.
        expected_vocab_size: the current vocabulary's size; a different one is an error, since token
            ids would silently mean other things.
        expected_meta: the current run's settings (``v_sum`` version, trigger, ...); each key whose
            stored value differs (or is missing) warns, naming the key: the weights still load, but the
            policy was trained under other instructions.
        device: where to put the weights (default: CPU).

    Raises:
        ValueError: a vocabulary mismatch (naming ``vocab_size`` and both values) or an unknown format.
    """
    try:
        payload = torch.load(Path(path), map_location="cpu", weights_only=True)
    except Exception as exc:  # any file torch cannot unpickle (TOML, empty, truncated) is not a checkpoint
        raise ValueError(f"{path}: not a torch checkpoint ({type(exc).__name__})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT_VERSION:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(
            f"{path}: not a simlab policy checkpoint of format {FORMAT_VERSION} (found {found!r})"
        )
    stored_vocab = payload["vocab_size"]
    if expected_vocab_size is not None and stored_vocab != expected_vocab_size:
        raise ValueError(
            f"`vocab_size` mismatch: checkpoint {path} has vocab_size={stored_vocab}, "
            f"the current vocabulary has vocab_size={expected_vocab_size}"
        )
    meta: dict[str, Any] = payload["meta"]
    for key, want in (expected_meta or {}).items():
        if key not in meta:
            warnings.warn(f"checkpoint {path} has no `{key}`; expected {want!r}", stacklevel=2)
        elif meta[key] != want:
            warnings.warn(
                f"checkpoint {path} has `{key}`={meta[key]!r} but this run uses {want!r}", stacklevel=2
            )
    policy = Policy(config_from_dict(payload["config"]))
    policy.load_state_dict(payload["state_dict"])
    if device is not None:
        policy.to(device)
    return policy, meta


def check_checkpoint(path: str | os.PathLike[str], key: str, vocab_size: int) -> None:
    """Refuse, as bad input of ``key``, a file that does not load as a simlab policy checkpoint of this
    vocabulary (checked where the input enters, before any store is written)."""
    from simlab.errors import ConfigError

    try:
        load_checkpoint(path, expected_vocab_size=vocab_size)
    except ValueError as exc:
        raise ConfigError.invalid(key, str(path), f"it is not a simlab policy checkpoint of this task "
                                  f"({' '.join(str(exc).split())}); give a checkpoint simlab wrote") from None
