from pathlib import Path

import pytest
import torch

from tests.checkpoint.random_checkpoints import CONFIG, SOME_TENSOR, save_random_model
from transformer.checkpoint.layout import CHECKSUM_METADATA_KEY, CheckpointError
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.checkpoint.weights import (
    load_model_tensors,
    model_tensors,
    read_weights_metadata,
    weights_sha256,
)
from transformer.model.transformer import Transformer


def test_a_checkpoint_records_the_sha256_of_its_weights(tmp_path: Path) -> None:
    save_random_model(tmp_path / "a", seed=1)
    metadata = read_weights_metadata(tmp_path / "a" / "model.safetensors")
    checkpoint = load_checkpoint(tmp_path / "a")
    assert metadata[CHECKSUM_METADATA_KEY] == weights_sha256(checkpoint.weights)
    assert len(metadata[CHECKSUM_METADATA_KEY]) == 64
    changed = {**checkpoint.weights, SOME_TENSOR: checkpoint.weights[SOME_TENSOR] + 1e-6}
    assert weights_sha256(changed) != metadata[CHECKSUM_METADATA_KEY]


def test_tied_embeddings_are_stored_once_and_tied_again_on_load() -> None:
    torch.manual_seed(0)
    model = Transformer(CONFIG)
    tensors = model_tensors(model)
    shared = [name for name, tensor in model.state_dict().items() if name not in tensors]
    assert shared  # the shared source/target embedding and output projection (section 3.4)
    torch.manual_seed(1)
    copy = Transformer(CONFIG)
    load_model_tensors(copy, tensors, "saved")
    assert all(torch.equal(copy.state_dict()[name], tensor) for name, tensor in model.state_dict().items())


def test_weights_that_do_not_fit_the_model_name_their_source() -> None:
    tensors = model_tensors(Transformer(CONFIG))
    with pytest.raises(CheckpointError, match=r"^saved: weights do not match the model: missing \['"):
        load_model_tensors(Transformer(CONFIG), {"extra": torch.zeros(1)}, "saved")
    resized = {**tensors, SOME_TENSOR: torch.zeros(3)}
    with pytest.raises(CheckpointError) as refused:
        load_model_tensors(Transformer(CONFIG), resized, "saved")
    assert str(refused.value) == f"saved: {SOME_TENSOR} has shape (3,), the model expects (16,)"
