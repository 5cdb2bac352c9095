import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from transformer.checkpoint.layout import CheckpointError, read_index
from transformer.cli import main
from transformer.config.files import load_config
from transformer.data.pipeline.token_batch_sampler import BATCH_ORDER_VERSION
from transformer.data.prepare import prepare_data
from transformer.training import gradient_step as gradient_step_module
from transformer.training import trainer as trainer_module
from transformer.training.checkpoint import load_training_checkpoint
from transformer.training.result import TrainingDivergedError
from transformer.training.trainer import Trainer

#: Runs compared for equality name their attention path: "auto" is timed by each process, and on a busy machine
#: the answer is not cached, so two runs can pick different paths and round differently (see
#: ``tests/training/test_distributed.py``).
FIXED_ATTENTION = {"attention_implementation": "fused"}


def read_metrics(run_dir: Path, kind: str = "train") -> dict[int, dict]:
    """The last record of each step (a resumed run re-logs the steps after its checkpoint)."""
    records = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == kind:
            records[record["step"]] = record
    return records


def test_training_writes_metrics_checkpoints_and_learns(trained_run: Path) -> None:
    metrics = read_metrics(trained_run)
    assert sorted(metrics) == list(range(1, 25))
    assert metrics[24]["train_loss"] < metrics[1]["train_loss"] - 0.5
    first = metrics[1]
    assert first["learning_rate"] > 0 and first["tokens_per_second"] > 0 and 0 <= first["padding_ratio"] < 0.5
    valid = read_metrics(trained_run, "valid")
    assert sorted(valid) == [4, 8, 12, 16, 20, 24]
    assert valid[24]["valid_perplexity"] < valid[4]["valid_perplexity"]
    index = read_index(trained_run / "checkpoints")
    assert index["latest"] == "step-00000024"
    # The last two plus the best by validation loss are kept.
    assert set(index["checkpoints"]) >= {"step-00000020", "step-00000024"}
    assert len(index["checkpoints"]) <= 3
    on_disk = sorted(path.name for path in (trained_run / "checkpoints").iterdir() if path.is_dir())
    assert on_disk == sorted(index["checkpoints"])


def test_checkpoint_holds_only_safetensors_and_json(trained_run: Path, monkeypatch) -> None:
    checkpoint_dir = trained_run / "checkpoints" / "step-00000024"
    assert sorted(path.name for path in checkpoint_dir.iterdir()) == [
        "model.safetensors",
        "optimizer.safetensors",
        "tokenizer.model",
        "trainer_state.json",
    ]

    def refuse(*args, **kwargs):
        raise AssertionError("a checkpoint must never be unpickled")

    monkeypatch.setattr(torch, "load", refuse)
    monkeypatch.setattr("pickle.load", refuse)
    monkeypatch.setattr("pickle.loads", refuse)
    checkpoint = load_training_checkpoint(checkpoint_dir)
    assert checkpoint.state is not None and checkpoint.state.step == 24
    model = checkpoint.build_model()
    assert model.src_embedding is model.tgt_embedding  # ties survive saving without duplicate tensors


@pytest.mark.parametrize("token_store", [False, True], ids=["in-memory", "token-store"])
def test_resume_after_sigkill_reaches_the_same_loss(tmp_path: Path, write_config, token_store: bool) -> None:
    config = write_config(
        tmp_path,
        model=FIXED_ATTENTION,
        train={"max_steps": 40, "checkpoint_every": 4, "validate_every": 0},
        data={"token_store": token_store},
    )
    reference_dir = tmp_path / "uninterrupted"
    assert main(["train", "--config", str(config), "--output-dir", str(reference_dir)]) == 0

    killed_dir = tmp_path / "killed"
    command = [
        sys.executable,
        "-m",
        "transformer.cli",
        "train",
        "--config",
        str(config),
        "--output-dir",
        str(killed_dir),
    ]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    index_path = killed_dir / "checkpoints" / "index.json"
    deadline = time.monotonic() + 120
    while not index_path.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    killed_at = int(read_index(killed_dir / "checkpoints")["latest"].split("-")[1])
    assert 4 <= killed_at < 40, "the process must be killed mid-training"

    assert main(["train", "--config", str(config), "--output-dir", str(killed_dir), "--resume"]) == 0
    assert (killed_dir / "token_store" / "train" / "manifest.json").exists() == token_store
    resumed, reference = read_metrics(killed_dir), read_metrics(reference_dir)
    for step in range(killed_at + 1, 41):  # bit for bit: same losses, same weights file
        assert resumed[step]["train_loss"] == reference[step]["train_loss"]
    final = killed_dir / "checkpoints" / "step-00000040" / "model.safetensors"
    expected = reference_dir / "checkpoints" / "step-00000040" / "model.safetensors"
    assert final.read_bytes() == expected.read_bytes()


def test_token_store_trains_exactly_like_the_in_memory_corpus(tmp_path: Path, write_config) -> None:
    losses = {}
    for token_store in (False, True):
        config = write_config(
            tmp_path,
            f"{token_store}.yaml",
            model=FIXED_ATTENTION,
            train={"max_steps": 8, "validate_every": 0},
            data={"token_store": token_store},
        )
        run_dir = tmp_path / str(token_store)
        assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
        losses[token_store] = [record["train_loss"] for _, record in sorted(read_metrics(run_dir).items())]
    assert (tmp_path / "True" / "token_store" / "train" / "manifest.json").exists()
    assert not (tmp_path / "False" / "token_store").exists()
    assert losses[True] == losses[False]


def test_existing_run_is_not_overwritten_without_resume(trained_run: Path, capsys, write_config) -> None:
    config = write_config(trained_run.parent, name="again.yaml")
    assert main(["train", "--config", str(config), "--output-dir", str(trained_run)]) == 2
    assert "already holds checkpoints" in capsys.readouterr().err


def test_resume_refuses_a_different_model_config(
    trained_run: Path, tmp_path: Path, capsys, write_config
) -> None:
    config = write_config(tmp_path, model={"d_ff": 48})
    assert main(["train", "--config", str(config), "--output-dir", str(trained_run), "--resume"]) == 2
    last_line = capsys.readouterr().err.strip().splitlines()[-1]
    assert last_line.startswith("transformer train: error: ")
    assert "model config differs" in last_line and "d_ff 64 (checkpoint) != 48" in last_line


def test_resume_refuses_a_different_vocabulary(tmp_path: Path, capsys, write_config) -> None:
    config = write_config(tmp_path, train={"max_steps": 4})
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    other = write_config(tmp_path, name="other.yaml", data={"synthetic_seed": 99}, train={"max_steps": 8})
    (run_dir / "tokenizer.model").unlink()
    for path in (run_dir / "data").iterdir():
        path.unlink()
    assert main(["train", "--config", str(other), "--output-dir", str(run_dir), "--resume"]) == 2
    assert "vocabulary differs" in capsys.readouterr().err


def test_nan_loss_stops_training_and_keeps_the_last_good_checkpoint(
    tmp_path: Path, monkeypatch, write_config
) -> None:
    experiment = load_config(write_config(tmp_path, train={"max_steps": 12}))
    run_dir = tmp_path / "run"
    data = prepare_data(experiment.data, experiment.model.vocab_size, run_dir)
    real_loss = gradient_step_module.label_smoothed_nll_loss
    calls = {"count": 0}

    def loss_that_breaks(logits, target, epsilon, ignore_index):
        calls["count"] += 1
        loss, nll = real_loss(logits, target, epsilon, ignore_index)
        return (loss * float("nan"), nll) if calls["count"] > 6 else (loss, nll)

    monkeypatch.setattr(gradient_step_module, "label_smoothed_nll_loss", loss_that_breaks)
    before = None
    with pytest.raises(TrainingDivergedError, match="loss became nan at step"):
        trainer = Trainer(experiment, run_dir, data)
        trainer.train()
    index = read_index(run_dir / "checkpoints")
    assert index["latest"] == "step-00000004"
    before = load_training_checkpoint(run_dir / "checkpoints" / "step-00000004")
    assert all(torch.isfinite(tensor).all() for tensor in before.weights.values())
    assert not (run_dir / "checkpoints" / "step-00000008").exists()


def test_failed_checkpoint_write_leaves_previous_checkpoints_intact(
    tmp_path: Path, monkeypatch, write_config
) -> None:
    experiment = load_config(write_config(tmp_path, train={"max_steps": 8}))
    run_dir = tmp_path / "run"
    data = prepare_data(experiment.data, experiment.model.vocab_size, run_dir)
    trainer = Trainer(experiment, run_dir, data)
    saves = {"count": 0}
    real_save = __import__("transformer.training.checkpoint", fromlist=["x"]).save_safetensors_file

    def failing_second_save(tensors, path, metadata):
        if "optimizer" in path.name:
            saves["count"] += 1
            if saves["count"] == 2:
                raise OSError("disk full")
        return real_save(tensors, path, metadata)

    monkeypatch.setattr("transformer.training.checkpoint.save_safetensors_file", failing_second_save)
    with pytest.raises(OSError, match="disk full"):
        trainer.train()
    checkpoints = run_dir / "checkpoints"
    assert read_index(checkpoints)["latest"] == "step-00000004"
    assert load_training_checkpoint(checkpoints / "step-00000004").state.step == 4
    assert not (checkpoints / "step-00000008").exists()


def test_resuming_a_finished_run_trains_no_further(trained_run: Path, write_config, capsys) -> None:
    config = write_config(trained_run.parent, name="finished.yaml", train={"max_steps": 24})
    before = (trained_run / "metrics.jsonl").read_text()
    assert main(["train", "--config", str(config), "--output-dir", str(trained_run), "--resume"]) == 0
    assert "trained 24 steps" in capsys.readouterr().out
    assert (trained_run / "metrics.jsonl").read_text() == before
    assert read_index(trained_run / "checkpoints")["latest"] == "step-00000024"


def test_final_validation_is_not_repeated(tmp_path: Path, write_config) -> None:
    config = write_config(tmp_path, train={"max_steps": 8, "validate_every": 4, "checkpoint_every": 0})
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "run")]) == 0
    steps = [
        json.loads(line)["step"] for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    ]
    valid_steps = [
        json.loads(line)["step"]
        for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
        if json.loads(line)["kind"] == "valid"
    ]
    assert valid_steps == [4, 8] and max(steps) == 8
    assert read_index(tmp_path / "run" / "checkpoints")["latest"] == "step-00000008"


@pytest.mark.slow
def test_compiled_training_takes_the_eager_steps(tmp_path: Path, write_config) -> None:
    # train.compile runs the training forward through torch.compile; without dropout (whose random masks
    # inductor draws differently) the losses and weights must match eager training.
    train = {"max_steps": 6, "validate_every": 0, "checkpoint_every": 0}
    eager_config = write_config(tmp_path, name="eager.yaml", model={"dropout": 0.0}, train=train)
    compiled_config = write_config(
        tmp_path, name="compiled.yaml", model={"dropout": 0.0}, train={**train, "compile": True}
    )
    for config, name in ((eager_config, "eager"), (compiled_config, "compiled")):
        assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / name)]) == 0
    eager, compiled = read_metrics(tmp_path / "eager"), read_metrics(tmp_path / "compiled")
    assert sorted(compiled) == sorted(eager) == list(range(1, 7))
    for step, record in eager.items():
        assert compiled[step]["train_loss"] == pytest.approx(record["train_loss"], rel=1e-4)
    final = load_file(str(tmp_path / "compiled" / "checkpoints" / "step-00000006" / "model.safetensors"))
    expected = load_file(str(tmp_path / "eager" / "checkpoints" / "step-00000006" / "model.safetensors"))
    for name, tensor in expected.items():
        if name.endswith("k_proj.bias"):
            # Its gradient is zero up to rounding (a key bias shifts every score of a query alike), and Adam
            # turns rounding noise into full-size steps: no two computations agree on it.
            continue
        torch.testing.assert_close(final[name], tensor, rtol=1e-3, atol=1e-4, msg=name)


@pytest.mark.parametrize(("bf16_seconds", "expected"), [(0.002, "bf16"), (0.030, "fp32")])
def test_auto_precision_follows_the_probe(
    tmp_path: Path, write_config, monkeypatch, bf16_seconds: float, expected: str
) -> None:
    from transformer.autotune import cache as cache_module
    from transformer.autotune import precision_probe

    monkeypatch.setattr(precision_probe, "reduced_precision_candidate", lambda device: "bf16")
    monkeypatch.setattr(
        precision_probe,
        "measure_precision_seconds",
        lambda shape, device, candidates: {"fp32": 0.010, "bf16": bf16_seconds},
    )
    monkeypatch.setattr(cache_module.os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    monkeypatch.setenv("TRANSFORMER_CACHE_DIR", str(tmp_path / "cache"))
    experiment = load_config(write_config(tmp_path, train={"precision": "auto"}))
    data = prepare_data(experiment.data, experiment.model.vocab_size, tmp_path / "run")
    messages: list[str] = []
    reporter = trainer_module.SilentReporter()
    reporter.message = messages.append  # type: ignore[method-assign]
    trainer = Trainer(experiment, tmp_path / "run", data, reporter=reporter)
    assert trainer.precision == expected
    (line,) = [message for message in messages if message.startswith("auto precision:")]
    assert line.startswith(f"auto precision: {expected}: a bf16 training product at d_model 32 x d_ff 64")
    assert (tmp_path / "cache" / "autotune.json").exists()


def test_resume_falls_back_past_a_damaged_checkpoint_and_drops_redone_metrics(
    tmp_path: Path, write_config, capsys
) -> None:
    config = write_config(tmp_path, train={"max_steps": 8, "checkpoint_every": 4, "validate_every": 0})
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    reference = read_metrics(run_dir)
    # A copy cut short: the latest checkpoint's weights lose their second half.
    weights = run_dir / "checkpoints" / "step-00000008" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir), "--resume"]) == 0
    output = capsys.readouterr().err  # the trainer's messages go to standard error
    assert "warning: skipping a damaged checkpoint" in output and "step-00000008" in output
    assert "resumed from" in output and "step-00000004 at step 4" in output
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    steps = [record["step"] for record in records if record["kind"] == "train"]
    assert steps == list(range(1, 9))  # no step logged twice
    resumed = read_metrics(run_dir)
    for step in range(5, 9):  # redone from the step-4 checkpoint: the same losses
        assert resumed[step]["train_loss"] == pytest.approx(reference[step]["train_loss"], rel=1e-5)
    assert load_training_checkpoint(run_dir / "checkpoints" / "step-00000008").state.step == 8


@pytest.mark.parametrize("saved_order", [None, BATCH_ORDER_VERSION], ids=["unversioned", "current"])
def test_resume_mid_epoch_across_a_batch_order_change_warns_and_records_the_new_order(
    tmp_path: Path, write_config, capsys, saved_order: int | None
) -> None:
    """A checkpoint that does not record its batch order (written before it was versioned) warns mid-epoch."""
    config = write_config(tmp_path, train={"max_steps": 2, "checkpoint_every": 2, "validate_every": 0})
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    state_file = run_dir / "checkpoints" / "step-00000002" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    assert state["batch_order"] == BATCH_ORDER_VERSION and state["batches_done_in_epoch"] == 2
    if saved_order is None:
        del state["batch_order"]  # as written before the order was versioned
        state_file.write_text(json.dumps(state))
    longer = write_config(tmp_path, name="longer.yaml", train={"max_steps": 3, "validate_every": 0})
    capsys.readouterr()
    assert main(["train", "--config", str(longer), "--output-dir", str(run_dir), "--resume"]) == 0
    output = capsys.readouterr().err
    warned = (
        "does not record its sampler's batch order; if it was written before the order changed (2026-11-24), "
        f"the rest of epoch 0 follows this version's order {BATCH_ORDER_VERSION}" in output
    )
    assert warned == (saved_order is None) and "resumed from" in output
    resumed = load_training_checkpoint(run_dir / "checkpoints" / "step-00000003").state
    assert resumed is not None and resumed.step == 3 and resumed.batch_order == BATCH_ORDER_VERSION


def test_resume_refuses_a_checkpoint_of_another_number_of_processes(tmp_path: Path, write_config) -> None:
    config = write_config(tmp_path, train={"max_steps": 2, "checkpoint_every": 2, "validate_every": 0})
    experiment = load_config(config)
    run_dir = tmp_path / "run"
    data = prepare_data(experiment.data, experiment.model.vocab_size, run_dir)
    Trainer(experiment, run_dir, data).train()
    checkpoint = load_training_checkpoint(run_dir / "checkpoints" / "step-00000002")
    trainer = Trainer(experiment, run_dir, data)
    trainer.restore(checkpoint)  # its own checkpoint: one process, as this one
    assert trainer.state.step == 2
    # As if a second rank had saved its random state beside rank 0's: a 2-process torchrun checkpoint.
    checkpoint.optimizer_tensors["rng.cpu.rank1"] = checkpoint.optimizer_tensors["rng.cpu.rank0"]
    with pytest.raises(
        CheckpointError, match=r"saved by 2 training process\(es\), resumed by 1; .*nproc-per-node 2"
    ):
        Trainer(experiment, run_dir, data).restore(checkpoint)


def test_resume_with_every_checkpoint_damaged_names_them(tmp_path: Path, write_config, capsys) -> None:
    config = write_config(tmp_path, train={"max_steps": 4, "checkpoint_every": 4, "validate_every": 0})
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    (run_dir / "checkpoints" / "step-00000004" / "trainer_state.json").write_text("{")
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir), "--resume"]) != 0
    error = capsys.readouterr().err
    assert "no readable checkpoint to resume from" in error and "unreadable training state" in error


def test_the_last_step_is_validated_even_between_validation_steps(tmp_path: Path, write_config) -> None:
    # Checkpoints every 2 steps, validation every 4: step 6 ends the run on a checkpoint step only.
    config = write_config(tmp_path, train={"max_steps": 6, "checkpoint_every": 2, "validate_every": 4})
    experiment = load_config(config)
    run_dir = tmp_path / "run"
    data = prepare_data(experiment.data, experiment.model.vocab_size, run_dir)
    result = Trainer(experiment, run_dir, data).train()
    valid = read_metrics(run_dir, "valid")
    assert sorted(valid) == [4, 6]
    assert result.valid_loss == pytest.approx(valid[6]["valid_loss"])  # not step 4's, reported as final
    final = load_training_checkpoint(run_dir / "checkpoints" / "step-00000006")
    assert final.state.valid_loss == pytest.approx(valid[6]["valid_loss"])
    assert final.state.stop_reason == "max_steps"
