"""The model config and tokenizer files a checkpoint's weights file vouches for (#48 item 4)."""

import hashlib
import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from tests.checkpoint.random_checkpoints import CONFIG, save_random_model
from transformer.averaging import write_average
from transformer.checkpoint.integrity import model_config_sha256
from transformer.checkpoint.layout import (
    CONFIG_CHECKSUM_METADATA_KEY,
    TOKENIZER_CHECKSUM_METADATA_KEY,
    CheckpointError,
)
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.checkpoint.weights import read_weights_metadata
from transformer.model.transformer import Transformer
from transformer.training.checkpoint import TrainerState, load_training_checkpoint, save_training_checkpoint

FIXTURE = Path(__file__).parents[1] / "fixtures" / "checkpoints-before-15"


def edit_stored_config(model_file: Path, **changes: object) -> None:
    """Change fields of the model config in a weights file's metadata, as an editor of the header would."""
    metadata = read_weights_metadata(model_file)
    metadata["model_config"] = json.dumps({**json.loads(metadata["model_config"]), **changes})
    save_file(load_file(str(model_file)), str(model_file), metadata=metadata)


def test_a_new_checkpoint_records_the_digests_of_its_config_and_each_tokenizer_file(tmp_path: Path) -> None:
    save_random_model(tmp_path / "checkpoint", seed=1)
    metadata = read_weights_metadata(tmp_path / "checkpoint" / "model.safetensors")
    assert metadata[CONFIG_CHECKSUM_METADATA_KEY] == model_config_sha256(CONFIG.to_dict())
    assert json.loads(metadata[TOKENIZER_CHECKSUM_METADATA_KEY]) == {
        "tokenizer.model": hashlib.sha256(b"tokenizer-bytes").hexdigest()
    }
    # The digest is of the values, not of their spelling: the stored JSON re-read gives the same one.
    assert model_config_sha256(json.loads(metadata["model_config"])) == metadata[CONFIG_CHECKSUM_METADATA_KEY]


def test_a_config_edited_in_the_header_is_refused_though_the_weights_still_fit(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    save_random_model(checkpoint, seed=1)
    edit_stored_config(checkpoint / "model.safetensors", num_heads=1)  # same tensor shapes, another model
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(checkpoint)
    assert str(refused.value) == (
        f"{checkpoint / 'model.safetensors'}: the model config does not match the SHA-256 recorded when the "
        "checkpoint was saved; it was edited or damaged (restore the file from a copy, or use another checkpoint)"
    )


def test_a_swapped_tokenizer_is_refused_by_every_loader_naming_it_and_the_checkpoint(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    save_random_model(checkpoint, seed=1)
    (checkpoint / "tokenizer.model").write_bytes(b"another tokenizer")
    expected = (
        f"{checkpoint / 'tokenizer.model'}: not the tokenizer checkpoint {checkpoint} was saved with (its "
        "SHA-256 differs from the one recorded in model.safetensors); restore the original file"
    )
    for load in (load_checkpoint, load_checkpoint_tokenizer, load_training_checkpoint):
        with pytest.raises(CheckpointError) as refused:
            load(checkpoint)
        assert str(refused.value) == expected
    with pytest.raises(CheckpointError, match="not the tokenizer checkpoint"):  # nor averaged under new sums
        write_average([checkpoint], tmp_path / "average")
    assert not (tmp_path / "average").exists()


def test_a_tokenizer_file_removed_or_added_is_refused(tmp_path: Path) -> None:
    checkpoint = tmp_path / "checkpoint"
    save_random_model(checkpoint, seed=1)
    (checkpoint / "vocab.json").write_text("{}", encoding="utf-8")  # the loader would read it
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(checkpoint)
    assert str(refused.value) == (
        f"{checkpoint / 'vocab.json'}: not part of checkpoint {checkpoint} (its model.safetensors records the "
        "tokenizer files ['tokenizer.model']); remove it"
    )
    (checkpoint / "vocab.json").unlink()
    (checkpoint / "notes.txt").write_text("a stray file, never read as a tokenizer\n", encoding="utf-8")
    assert load_checkpoint(checkpoint).tokenizer_files()["tokenizer.model"] == b"tokenizer-bytes"
    (checkpoint / "tokenizer.model").unlink()
    with pytest.raises(CheckpointError) as refused:
        load_checkpoint(checkpoint)
    assert (
        str(refused.value)
        == f"{checkpoint / 'tokenizer.model'}: missing; checkpoint {checkpoint} was saved with it"
    )


def test_training_checkpoints_and_averages_carry_the_digests(tmp_path: Path) -> None:
    torch.manual_seed(1)
    model = Transformer(CONFIG)
    files = {"tokenizer.model": b"tokenizer-bytes"}
    save_training_checkpoint(tmp_path / "step-1", model, CONFIG, files, TrainerState(step=1), {})
    write_average([tmp_path / "step-1"], tmp_path / "average")
    for name in ("step-1", "average"):
        metadata = read_weights_metadata(tmp_path / name / "model.safetensors")
        assert metadata[CONFIG_CHECKSUM_METADATA_KEY] == model_config_sha256(CONFIG.to_dict())
        assert TOKENIZER_CHECKSUM_METADATA_KEY in metadata
        edit_stored_config(tmp_path / name / "model.safetensors", dropout=0.3)
        with pytest.raises(CheckpointError, match="the model config does not match the SHA-256"):
            load_checkpoint(tmp_path / name)


def test_an_old_training_checkpoint_is_checked_against_its_trainer_state_fingerprint(tmp_path: Path) -> None:
    old = tmp_path / "step-00000002"
    shutil.copytree(FIXTURE / "run" / "checkpoints" / "step-00000002", old)
    assert TOKENIZER_CHECKSUM_METADATA_KEY not in read_weights_metadata(old / "model.safetensors")
    assert load_checkpoint(old).model_config.d_model == 16  # its own tokenizer: loads as before
    tokenizer = (old / "tokenizer.model").read_bytes()
    (old / "tokenizer.model").write_bytes(tokenizer[:-1] + bytes([tokenizer[-1] ^ 1]))
    expected = (
        f"{old / 'tokenizer.model'}: not the tokenizer checkpoint {old} was trained with (its SHA-256 differs "
        "from the fingerprint in trainer_state.json); restore the original file"
    )
    for load in (load_checkpoint, load_checkpoint_tokenizer):
        with pytest.raises(CheckpointError) as refused:
            load(old)
        assert str(refused.value) == expected


def test_an_old_average_has_nothing_to_check_its_tokenizer_against_and_loads(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE / "average", tmp_path / "average")
    (tmp_path / "average" / "tokenizer.model").write_bytes(b"not checked: nothing was recorded")
    assert load_checkpoint(tmp_path / "average").tokenizer_files()["tokenizer.model"].startswith(b"not")
