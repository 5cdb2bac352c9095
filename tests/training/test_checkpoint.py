from pathlib import Path

import pytest
import torch

from transformer.cli import main
from transformer.config import TransformerConfig
from transformer.model.transformer import Transformer
from transformer.training.checkpoint import (
    CheckpointError,
    CheckpointManager,
    TrainerState,
    average_checkpoints,
    load_checkpoint,
    save_checkpoint,
    write_weights_checkpoint,
)

CONFIG = TransformerConfig(
    vocab_size=30, d_model=16, d_ff=32, num_heads=2, num_encoder_layers=1, num_decoder_layers=1
)


def save_random_model(path: Path, seed: int, config: TransformerConfig = CONFIG) -> Transformer:
    torch.manual_seed(seed)
    model = Transformer(config)
    save_checkpoint(path, model, config, {"tokenizer.model": b"tokenizer-bytes"})
    return model


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    model = save_random_model(tmp_path / "a", seed=1)
    loaded = load_checkpoint(tmp_path / "a").build_model()
    assert loaded.config == CONFIG
    for name, tensor in model.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[name], tensor)
    assert (tmp_path / "a" / "tokenizer.model").read_bytes() == b"tokenizer-bytes"
    assert not list(tmp_path.glob(".*"))  # no temporary directories left behind


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
    assert reloaded.state is None  # weights only
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


def test_unreadable_checkpoint_gives_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "model.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(CheckpointError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "bad")
    with pytest.raises(CheckpointError, match="no checkpoint here"):
        load_checkpoint(tmp_path)


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
    assert "--last 0" in capsys.readouterr().err
