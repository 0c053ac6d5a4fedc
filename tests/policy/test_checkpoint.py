"""Checkpoints: roundtrip, vocabulary mismatch, meta mismatch warnings, atomic writes."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch

from simlab.policy import checkpoint as checkpoint_module
from simlab.policy import load_checkpoint, save_checkpoint
from tests.policy.conftest import VOCAB, tiny_policy

META = {"v_sum": "v2", "trigger": {"kind": "threshold", "L": 0.95, "T_comp": None}, "task": "lookup"}


def test_roundtrip_restores_config_weights_and_meta(tmp_path: Path) -> None:
    policy = tiny_policy(value_head=False, dropout=0.1)
    path = tmp_path / "ckpt" / "policy.pt"
    save_checkpoint(path, policy, meta=META)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded, meta = load_checkpoint(path, expected_vocab_size=VOCAB, expected_meta=META)
    assert loaded.config == policy.config and meta == META
    loaded.eval()
    tokens = torch.randint(0, VOCAB, (2, 11))
    torch.testing.assert_close(loaded(tokens).logits, policy(tokens).logits, atol=0, rtol=0)
    assert loaded.lm_head.weight is loaded.wte.weight  # the tie survives loading
    assert [p.name for p in path.parent.iterdir()] == ["policy.pt"]  # no temp files left behind


def test_vocabulary_mismatch_is_an_error_with_both_sizes(tmp_path: Path) -> None:
    path = tmp_path / "p.pt"
    save_checkpoint(path, tiny_policy(), meta=META)
    with pytest.raises(ValueError, match=rf"`vocab_size`.*vocab_size={VOCAB}.*vocab_size=40"):
        load_checkpoint(path, expected_vocab_size=40)


@pytest.mark.parametrize(
    ("expected", "needle"),
    [
        ({**META, "v_sum": "v3"}, "`v_sum`='v2' but this run uses 'v3'"),
        ({**META, "trigger": {"kind": "threshold", "L": 0.9, "T_comp": None}}, "`trigger`"),
        ({"summary_tokens": 8}, "has no `summary_tokens`"),
    ],
)
def test_meta_mismatch_warns_naming_the_key(tmp_path: Path, expected: dict[str, object], needle: str) -> None:
    path = tmp_path / "p.pt"
    save_checkpoint(path, tiny_policy(), meta=META)
    with pytest.warns(UserWarning, match=needle.replace("[", r"\[")) as record:
        policy, meta = load_checkpoint(path, expected_meta=expected)
    assert len(record) == 1 and meta == META and policy.config.vocab_size == VOCAB


def test_a_crash_while_writing_keeps_the_old_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "p.pt"
    save_checkpoint(path, tiny_policy(seed=1), meta={"v_sum": "old"})
    real_save = torch.save

    def crash(obj: object, f: object) -> None:
        real_save({"partial": torch.zeros(3)}, f)  # type: ignore[arg-type]
        raise RuntimeError("disk full")

    monkeypatch.setattr(checkpoint_module.torch, "save", crash)
    with pytest.raises(RuntimeError, match="disk full"):
        save_checkpoint(path, tiny_policy(seed=2), meta={"v_sum": "new"})
    monkeypatch.undo()
    _, meta = load_checkpoint(path)
    assert meta == {"v_sum": "old"}
    assert [p.name for p in tmp_path.iterdir()] == ["p.pt"]


def test_meta_that_weights_only_loading_could_not_read_is_refused_at_save(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"`meta.trigger.fn=.*` is invalid"):
        save_checkpoint(tmp_path / "p.pt", tiny_policy(), meta={"trigger": {"fn": object()}})
    assert not list(tmp_path.iterdir())


def test_a_foreign_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "p.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(ValueError, match="not a simlab policy checkpoint"):
        load_checkpoint(path)
