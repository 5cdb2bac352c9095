import json
from pathlib import Path

import pytest
import torch

from transformer.checkpoint.layout import CheckpointError
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer
from transformer.training.checkpoint import (
    CheckpointManager,
    TrainerState,
    load_training_checkpoint,
    optimizer_tensors,
    read_trainer_state,
    restore_optimizer,
)

CONFIG = TransformerConfig(
    vocab_size=30, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1
)


def test_manager_keeps_last_k_and_the_best(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep_last=2)
    model = Transformer(CONFIG)
    best = None
    for step, valid_loss in [(1, 3.0), (2, 1.0), (3, 2.0), (4, 2.5), (5, None)]:
        best = valid_loss if valid_loss is not None and (best is None or valid_loss < best) else best
        state = TrainerState(step=step, valid_loss=valid_loss, best_valid_loss=best)
        manager.save(model, CONFIG, {"tokenizer.model": b"tok"}, state, {})
    kept = sorted(path.name for path in tmp_path.iterdir() if path.is_dir())
    assert kept == ["step-00000002", "step-00000004", "step-00000005"]
    assert load_checkpoint(tmp_path).path.name == "step-00000002"  # a run resolves to its best
    assert manager.latest() == tmp_path / "step-00000005"


def test_training_checkpoint_restores_the_optimizer_and_state_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Transformer(CONFIG)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98), eps=1e-9)
    model(torch.tensor([[5, 6, 2]]), torch.tensor([[1, 7]])).sum().backward()
    optimizer.step()
    state = TrainerState(
        step=7, epoch=1, batches_done_in_epoch=3, param_groups=optimizer.state_dict()["param_groups"]
    )
    CheckpointManager(tmp_path, keep_last=1).save(
        model, CONFIG, {"tokenizer.model": b"tok"}, state, optimizer_tensors(optimizer)
    )
    loaded = load_training_checkpoint(tmp_path)
    assert json.dumps(loaded.state.__dict__) == json.dumps(state.__dict__)  # JSON keeps tuples as lists
    fresh = torch.optim.Adam(Transformer(CONFIG).parameters(), lr=5.0)
    restore_optimizer(fresh, loaded.optimizer_tensors, loaded.state.param_groups)
    restored = fresh.state_dict()["state"]
    assert restored.keys() == optimizer.state_dict()["state"].keys()
    for index, values in optimizer.state_dict()["state"].items():
        for name, value in values.items():
            assert torch.equal(torch.as_tensor(restored[index][name]), torch.as_tensor(value)), (index, name)
    assert fresh.param_groups[0]["lr"] == 1e-3 and fresh.param_groups[0]["betas"] == (0.9, 0.98)
    # The neutral reader sees the same weights and no training state.
    plain = load_checkpoint(tmp_path)
    assert not hasattr(plain, "state") and plain.weights.keys() == loaded.weights.keys()


def test_read_trainer_state_reads_the_state_alone(tmp_path: Path) -> None:
    state = TrainerState(step=3, tokens_seen=120, elapsed_seconds=4.5)
    path = CheckpointManager(tmp_path, keep_last=1).save(
        Transformer(CONFIG), CONFIG, {"tokenizer.model": b"tok"}, state, {}
    )
    read = read_trainer_state(path)
    assert read is not None and (read.step, read.tokens_seen, read.elapsed_seconds) == (3, 120, 4.5)
    (path / "trainer_state.json").unlink()
    assert read_trainer_state(path) is None  # a weights-only checkpoint
    (path / "trainer_state.json").write_text("{broken", encoding="utf-8")
    with pytest.raises(CheckpointError, match="unreadable training state"):
        read_trainer_state(path)
