from pathlib import Path

import pytest
import torch

from transformer.averaging import average_checkpoints, write_weights_checkpoint
from transformer.checkpoint.layout import CHECKSUM_METADATA_KEY, CheckpointError, read_index
from transformer.checkpoint.model_checkpoint import load_checkpoint, save_checkpoint
from transformer.checkpoint.weights import read_weights_metadata, weights_sha256
from transformer.cli import main
from transformer.model.config import TransformerConfig
from transformer.model.transformer import Transformer

CONFIG = TransformerConfig(
    vocab_size=30, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1
)


def save_random_model(path: Path, seed: int, config: TransformerConfig = CONFIG) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(config)
    save_checkpoint(path, model, config, {"tokenizer.model": b"tokenizer-bytes"})
    return model


def test_averaging_identical_checkpoints_is_the_identity(tmp_path: Path) -> None:
    model = save_random_model(tmp_path / "a", seed=1)
    save_random_model(tmp_path / "b", seed=1)
    averaged = average_checkpoints([tmp_path / "a", tmp_path / "b"])
    for name, tensor in averaged.weights.items():
        assert torch.equal(tensor, model.state_dict()[name])


def test_averaging_two_checkpoints_gives_their_mean(tmp_path: Path) -> None:
    first = save_random_model(tmp_path / "a", seed=1).state_dict()
    second = save_random_model(tmp_path / "b", seed=2).state_dict()
    averaged = average_checkpoints([tmp_path / "a", tmp_path / "b"])
    for name, tensor in averaged.weights.items():
        torch.testing.assert_close(tensor, (first[name] + second[name]) / 2)
    write_weights_checkpoint(averaged, tmp_path / "avg", [tmp_path / "a", tmp_path / "b"])
    reloaded = load_checkpoint(tmp_path / "avg")
    assert sorted(path.name for path in (tmp_path / "avg").iterdir()) == [
        "averaged_from.json",
        "model.safetensors",
        "tokenizer.model",
    ]  # weights only: no optimizer or trainer state
    torch.testing.assert_close(
        reloaded.build_model().state_dict()["decoder.layers.0.feed_forward.linear_in.weight"],
        (
            first["decoder.layers.0.feed_forward.linear_in.weight"]
            + second["decoder.layers.0.feed_forward.linear_in.weight"]
        )
        / 2,
    )


def test_averaging_refuses_different_architectures(tmp_path: Path) -> None:
    save_random_model(tmp_path / "a", seed=1)
    save_random_model(tmp_path / "b", seed=1, config=TransformerConfig(**{**CONFIG.to_dict(), "d_ff": 48}))
    with pytest.raises(CheckpointError, match=r"d_ff 48 \(checkpoint\) != 32"):
        average_checkpoints([tmp_path / "a", tmp_path / "b"])


def test_average_checkpoints_command(trained_run: Path, tmp_path: Path, capsys) -> None:
    output = tmp_path / "averaged"
    assert (
        main(["average-checkpoints", "--run", str(trained_run), "--last", "2", "--output", str(output)]) == 0
    )
    assert "averaged 2 checkpoints" in capsys.readouterr().out
    averaged = load_checkpoint(output)
    checkpoints = trained_run / "checkpoints"
    names = sorted(path.name for path in checkpoints.iterdir() if path.is_dir())[-2:]
    sources = [load_checkpoint(checkpoints / name).weights for name in names]
    for name, tensor in averaged.weights.items():
        torch.testing.assert_close(tensor, (sources[0][name] + sources[1][name]) / 2)
    assert main(["average-checkpoints", "--output", str(output)]) == 2
    assert (
        main(["average-checkpoints", "--run", str(trained_run), "--last", "0", "--output", str(output)]) == 2
    )
    assert "argument --last: expected an integer of at least 1, got '0'" in capsys.readouterr().err


def test_training_and_averaged_checkpoints_carry_the_checksum_of_their_weights(
    trained_run: Path, tmp_path: Path
) -> None:
    checkpoints = trained_run / "checkpoints"
    averaged = tmp_path / "averaged"
    assert (
        main(["average-checkpoints", "--run", str(trained_run), "--last", "2", "--output", str(averaged)])
        == 0
    )
    for directory in [*(checkpoints / name for name in read_index(checkpoints)["checkpoints"]), averaged]:
        recorded = read_weights_metadata(directory / "model.safetensors")[CHECKSUM_METADATA_KEY]
        assert recorded == weights_sha256(load_checkpoint(directory).weights)
