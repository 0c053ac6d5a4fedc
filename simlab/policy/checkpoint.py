"""Policy checkpoints: weights, config, vocabulary size and run metadata (``v_sum`` version, trigger).

A checkpoint is one ``torch.save`` file of plain containers and tensors, so it loads with
``torch.load(..., weights_only=True)`` (no pickled code runs). Writes go to a temporary file in the
same directory and are moved into place with ``os.replace``, which is atomic: a crash leaves either
the old checkpoint or the new one, never a torn file.

A path a user gives as a checkpoint is read by :func:`read_payload`, which says what a foreign file is not
(:class:`NotACheckpoint`: empty, not a torch file, a torch file but not a simlab policy), and checked
against the run that would play it by :func:`check_policy_file` (one line naming the option).
"""

from __future__ import annotations

import functools
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from simlab.errors import ConfigError
from simlab.policy.config import PolicyConfig, config_from_dict, config_to_dict
from simlab.policy.model import Policy

FORMAT_VERSION = 1
"""Bumped when the layout below changes incompatibly."""
PAYLOAD_KEYS = ("format", "config", "vocab_size", "meta", "state_dict")
"""What :func:`save_checkpoint` writes; a file without all of them is not a simlab policy checkpoint."""
WRITTEN_BY = "give a policy checkpoint simlab wrote (a run's policy.pt, or a base checkpoint under mlruns/base/)"
"""What a checkpoint option allows, as its error says it."""


class NotACheckpoint(ValueError):
    """A file that is not a simlab policy checkpoint; the message says what it is not."""

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
        ValueError: a vocabulary mismatch (naming ``vocab_size`` and both values), or
            :class:`NotACheckpoint` for a file that is not one (:func:`read_payload`).
    """
    payload = read_payload(path)
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


def read_payload(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The contents of a checkpoint file, or :class:`NotACheckpoint` saying what the file is not.

    Loaded with ``weights_only=True``, so no pickled code runs whatever the file holds; any failure to load
    (a text file, an empty or truncated one, a zip of something else) means the file is not a torch
    checkpoint, whichever of its many exceptions torch raises for it.
    """
    path = Path(path)
    if path.stat().st_size == 0:
        raise NotACheckpoint("it is an empty file, not a torch checkpoint")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError, IndexError, ... for foreign files
        raise NotACheckpoint(f"it is not a torch checkpoint ({_kind(path)}; torch: {type(exc).__name__})") from None
    if not isinstance(payload, dict) or any(key not in payload for key in PAYLOAD_KEYS):
        held = sorted(map(str, payload))[:6] if isinstance(payload, dict) else type(payload).__name__
        raise NotACheckpoint(f"it is a torch file but not a simlab policy checkpoint (it holds {held})")
    if payload["format"] != FORMAT_VERSION:
        raise NotACheckpoint(f"it is a simlab checkpoint of format {payload['format']!r}; this simlab reads format "
                             f"{FORMAT_VERSION}")
    return payload


def _kind(path: Path) -> str:
    """What a file that torch cannot load looks like: text (TOML, JSON, ...) or binary."""
    with path.open("rb") as f:
        head = f.read(4096)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        return "a binary file"
    return "a text file"


@functools.lru_cache(maxsize=32)
def _policy_config(path: Path, mtime_ns: int, size: int) -> PolicyConfig:
    """The policy config a checkpoint file holds, read once per version of the file (a sweep checks the
    same checkpoint for every configuration it resolves)."""
    data = read_payload(path)["config"]
    try:
        return config_from_dict(dict(data))
    except (TypeError, ValueError, ConfigError) as exc:
        raise NotACheckpoint(f"its policy config does not load ({exc})") from None


def check_policy_file(
    key: str, path: str | os.PathLike[str], *, vocab_size: int, holds: int | None = None
) -> PolicyConfig:
    """The policy config of the checkpoint at ``path``, given as ``key``, checked against the run that would
    play it: a simlab policy checkpoint (:func:`read_payload`) of the run's vocabulary whose policy holds
    ``holds`` tokens (when given). Raises :class:`~simlab.errors.ConfigError` naming ``key``, the path and what the file
    is not; nothing is written."""
    shown = str(path)
    file = Path(path).resolve()
    if not file.is_file():
        raise ConfigError.invalid(key, shown, f"no such file; {WRITTEN_BY}")
    stat = file.stat()
    try:
        config = _policy_config(file, stat.st_mtime_ns, stat.st_size)
    except NotACheckpoint as exc:
        raise ConfigError.invalid(key, shown, f"{exc}; {WRITTEN_BY}") from None
    if config.vocab_size != vocab_size:
        raise ConfigError.invalid(key, shown, f"its policy reads vocab_size={config.vocab_size}, another task's "
                                  f"vocabulary; this run's task has vocab_size={vocab_size}: give a checkpoint "
                                  "trained on it")
    if holds is not None and config.max_len < holds:
        raise ConfigError.invalid(key, shown, f"its policy holds {config.max_len} tokens, fewer than this run's "
                                  f"window plus the summary cue ({holds}); give a checkpoint trained at this "
                                  "window or larger")
    return config
