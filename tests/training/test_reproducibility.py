"""Bit-reproducible training: identical files from identical runs, recorded defaults on resume, the switch."""

import hashlib
import json
from pathlib import Path

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load_file

from transformer.autotune.decision import TuningDecision
from transformer.autotune.model_tuning import ModelTuning
from transformer.cli import main
from transformer.config.train import TrainConfig
from transformer.safetensors_files import save_safetensors_file
from transformer.training.checkpoint import load_training_checkpoint
from transformer.training.measured_defaults import reconcile_tuning
from transformer.training.reproducibility import deterministic_algorithms

CHECKPOINT_FILES = ("model.safetensors", "optimizer.safetensors")


def file_digests(checkpoint: Path) -> dict[str, str]:
    return {name: hashlib.sha256((checkpoint / name).read_bytes()).hexdigest() for name in CHECKPOINT_FILES}


def test_metadata_order_does_not_change_the_file(tmp_path: Path) -> None:
    tensors = {"b": torch.arange(6.0).reshape(2, 3), "a": torch.ones(4, dtype=torch.bfloat16)}
    keys = [f"key{index}" for index in range(6)]
    written = []
    for order in (keys, keys[::-1], keys[3:] + keys[:3]):
        path = tmp_path / f"{len(written)}.safetensors"
        save_safetensors_file(tensors, path, {key: f"value of {key}" for key in order})
        written.append(path.read_bytes())
    assert written[0] == written[1] == written[2]
    header_length = int.from_bytes(written[0][:8], "little")
    metadata = json.loads(written[0][8 : 8 + header_length])["__metadata__"]
    assert list(metadata) == sorted(keys)
    loaded = load_file(str(tmp_path / "0.safetensors"))  # still a valid file for the library
    assert torch.equal(loaded["b"], tensors["b"]) and torch.equal(loaded["a"], tensors["a"])
    with safe_open(str(tmp_path / "0.safetensors"), "pt") as handle:
        assert handle.metadata() == {key: f"value of {key}" for key in keys}


def test_two_trainings_with_the_same_seed_write_identical_checkpoints(tmp_path: Path, write_config) -> None:
    """Two threads, dropout and the measured attention threshold (cached): the files agree byte for byte."""
    config = write_config(tmp_path, train={"max_steps": 10, "threads": 2, "checkpoint_every": 5})
    digests, losses = [], []
    for name in ("first", "second"):
        run_dir = tmp_path / name
        assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
        digests.append(file_digests(run_dir / "checkpoints" / "step-00000010"))
        records = (run_dir / "metrics.jsonl").read_text().splitlines()
        losses.append([json.loads(line).get("train_loss") for line in records])
    assert digests[0] == digests[1]
    assert losses[0] == losses[1]


def test_reconcile_keeps_the_recorded_measurement_and_what_the_config_sets() -> None:
    measured = ModelTuning(
        precision="fp32", explicit_max_length=32, threads=None, notes=["auto attention: x"]
    )
    recorded = {"precision": "bf16", "threads": 2, "explicit_max_length": 64}
    adopted = reconcile_tuning(recorded, measured)
    # Measured now and recorded differently: the record wins. Not measured now (set in the config): unchanged.
    assert (adopted.tuning.precision, adopted.tuning.explicit_max_length, adopted.tuning.threads) == (
        "bf16",
        64,
        None,
    )
    assert [note.split("=")[0] for note in adopted.notes] == [
        "resume: precision",
        "resume: explicit_max_length",
    ]
    assert reconcile_tuning(None, measured).tuning is measured  # a checkpoint from before the record


def test_a_resumed_run_applies_the_attention_threshold_its_start_measured(
    tmp_path: Path, write_config, monkeypatch, capsys
) -> None:
    def threshold(value: int):
        def decide(*args, **kwargs) -> TuningDecision:
            return TuningDecision(str(value), f"explicit attention up to length {value} (test)", {}, False)

        return decide

    config = write_config(tmp_path, train={"max_steps": 8, "checkpoint_every": 4, "validate_every": 0})
    final = {}
    for value in (64, 1):  # explicit attention for every length of the corpus, then fused for every length
        monkeypatch.setattr("transformer.autotune.model_tuning.decide_explicit_max_length", threshold(value))
        run_dir = tmp_path / f"threshold-{value}"
        assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
        loaded = load_file(str(run_dir / "checkpoints" / "step-00000008" / "model.safetensors"))
        final[value] = {name: tensor.clone() for name, tensor in loaded.items()}  # not a view of the file
    state = load_training_checkpoint(tmp_path / "threshold-64" / "checkpoints" / "step-00000008").state
    assert state is not None and state.tuning == {
        "precision": None,
        "threads": None,
        "explicit_max_length": 64,
    }
    # The two kernels' arithmetic differs, so a resume that measured anew would not reproduce the run.
    assert any(not torch.equal(final[64][name], final[1][name]) for name in final[64])

    run_dir = tmp_path / "threshold-64"
    weights = run_dir / "checkpoints" / "step-00000008" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:100])  # damaged: the resume falls back to step 4
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir), "--resume"]) == 0
    output = capsys.readouterr().err
    assert "resume: explicit_max_length=64 as the run measured at its start (measured now: 1)" in output
    resumed = load_file(str(weights))
    assert all(torch.equal(resumed[name], final[64][name]) for name in final[64])


def test_deterministic_refuses_a_time_budget_and_turns_the_switch_on_only_inside() -> None:
    with pytest.raises(
        ValueError, match=r"deterministic=True with max_minutes=5\.0: .*train\.max_minutes to null"
    ):
        TrainConfig(deterministic=True, max_minutes=5.0)
    assert not torch.are_deterministic_algorithms_enabled()
    with deterministic_algorithms(True, torch.device("cpu")):
        assert torch.are_deterministic_algorithms_enabled()
    assert not torch.are_deterministic_algorithms_enabled()
    with deterministic_algorithms(False, torch.device("cpu")):
        assert not torch.are_deterministic_algorithms_enabled()


def test_a_deterministic_run_trains_and_equals_the_default_run_on_the_cpu(
    tmp_path: Path, write_config
) -> None:
    digests = []
    for deterministic in (False, True):
        config = write_config(
            tmp_path, f"{deterministic}.yaml", train={"max_steps": 6, "deterministic": deterministic}
        )
        run_dir = tmp_path / str(deterministic)
        assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
        digests.append(file_digests(run_dir / "checkpoints" / "step-00000006")["model.safetensors"])
    assert digests[0] != "" and len(set(digests)) == 1
    assert not torch.are_deterministic_algorithms_enabled()
