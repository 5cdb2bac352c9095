import contextlib
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

from tests.training.recording_cli import install_recorders, read_records
from transformer.checkpoint.layout import read_index
from transformer.cli import main
from transformer.config.files import load_config
from transformer.data.pipeline.token_store import ARRAY_FILES, MANIFEST_FILE, read_manifest
from transformer.device import resolve_device
from transformer.model.transformer import Transformer

RECORDING_CLI = Path(__file__).with_name("recording_cli.py")
#: Runs compared for equality name their attention path. "auto" is timed by each job, and on a busy machine the
#: answer is not cached, so two jobs can pick different paths; their rounding then differs, and Adam turns the
#: key projections' bias gradients (zero but for rounding: softmax ignores a shift shared by all keys) into
#: steps of about the learning rate.
FIXED_ATTENTION = {"attention_implementation": "fused"}


def torchrun_train(config: Path, run_dir: Path, record_dir: Path, *options: str) -> subprocess.Popen:
    """Start ``transformer train`` as 2 CPU processes under torchrun, recording into ``record_dir``.

    The job's output goes to ``record_dir/torchrun.log`` (a pipe nobody reads while the test polls could fill).
    """
    record_dir.mkdir(exist_ok=True)
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(RECORDING_CLI),
        "train", "--config", str(config), "--output-dir", str(run_dir), *options,
    ]  # fmt: skip
    environment = {**os.environ, "RECORD_DIR": str(record_dir)}
    with (record_dir / "torchrun.log").open("w") as log:
        return subprocess.Popen(command, env=environment, stdout=log, stderr=subprocess.STDOUT)


def finish(job: subprocess.Popen, record_dir: Path) -> None:
    """Wait for a torchrun job and fail with the end of its output if it failed."""
    job.wait(timeout=300)
    assert job.returncode == 0, (record_dir / "torchrun.log").read_text()[-3000:]


def train_losses(run_dir: Path) -> dict[int, float]:
    """Training loss per step; the last record of a step wins (a resumed run re-logs steps after its checkpoint)."""
    losses = {}
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["kind"] == "train":
            losses[record["step"]] = record["train_loss"]
    return losses


@pytest.mark.slow
def test_two_processes_equal_one_process_seeing_the_same_global_batches(tmp_path: Path, write_config) -> None:
    """DDP over 2 CPU processes (gloo) == 1 process accumulating the same 2 batches per step."""
    common = {"max_steps": 6, "validate_every": 0, "checkpoint_every": 0, "device": "cpu"}
    # Dropout masks differ between processes; the arithmetic must not.
    model = {"dropout": 0.0, **FIXED_ATTENTION}
    distributed_config = write_config(
        tmp_path, name="ddp.yaml", model=model, train={**common, "accumulate": 1}
    )
    single_config = write_config(tmp_path, name="single.yaml", model=model, train={**common, "accumulate": 2})

    single_dir = tmp_path / "single"
    assert main(["train", "--config", str(single_config), "--output-dir", str(single_dir)]) == 0
    distributed_dir = tmp_path / "ddp"
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
        "-m", "transformer.cli", "train", "--config", str(distributed_config), "--output-dir", str(distributed_dir),
    ]  # fmt: skip
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]

    single = load_file(str(single_dir / "checkpoints" / "step-00000006" / "model.safetensors"))
    distributed = load_file(str(distributed_dir / "checkpoints" / "step-00000006" / "model.safetensors"))
    for name, tensor in single.items():
        torch.testing.assert_close(distributed[name], tensor, rtol=1e-4, atol=1e-5)
    # Both really trained: the weights moved away from the shared initialisation (seed 3 in the config).
    torch.manual_seed(3)
    untrained = Transformer(load_config(single_config).model)
    moved = max((untrained.state_dict()[name] - tensor).abs().max().item() for name, tensor in single.items())
    assert moved > 1e-3


@pytest.mark.slow
def test_two_processes_share_one_token_store_and_split_each_step(
    tmp_path: Path, write_config, monkeypatch
) -> None:
    """torchrun on a token store: rank 0 encodes the only store, rank 1 reads it, and every step's batches
    are split between the ranks exactly as 1 process accumulating 2 batches takes them."""
    common = {"max_steps": 6, "validate_every": 0, "checkpoint_every": 0, "device": "cpu"}
    model, data = {"dropout": 0.0, **FIXED_ATTENTION}, {"token_store": True}
    distributed_config = write_config(
        tmp_path, name="ddp.yaml", model=model, data=data, train={**common, "accumulate": 1}
    )
    single_config = write_config(
        tmp_path, name="single.yaml", model=model, data=data, train={**common, "accumulate": 2}
    )

    single_dir, single_records = tmp_path / "single", tmp_path / "single-records"
    single_records.mkdir()
    install_recorders(single_records, monkeypatch)
    assert main(["train", "--config", str(single_config), "--output-dir", str(single_dir)]) == 0
    distributed_dir, distributed_records = tmp_path / "ddp", tmp_path / "ddp-records"
    finish(torchrun_train(distributed_config, distributed_dir, distributed_records), distributed_records)

    # One store, encoded once, by rank 0; no temporary directory of a second build is left beside it.
    store_dir = distributed_dir / "token_store" / "train"
    assert read_records(distributed_records / "builds.jsonl") == [{"rank": 0, "directory": str(store_dir)}]
    assert [path.name for path in (distributed_dir / "token_store").iterdir()] == ["train"]
    assert sorted(path.name for path in store_dir.iterdir()) == sorted([*ARRAY_FILES, MANIFEST_FILE])
    # The single process encoded the same ids (same tokenizer, same array hashes) into its own run directory.
    single_manifest = read_manifest(single_dir / "token_store" / "train")
    distributed_manifest = read_manifest(store_dir)
    assert single_manifest is not None and distributed_manifest is not None
    for field in ("tokenizer_fingerprint", "pairs", "files"):
        assert distributed_manifest[field] == single_manifest[field]

    # Both ranks trained from that store; at each step they took disjoint batches, which together are the two
    # batches the single process accumulated at that step, in the same order.
    single_batches = [record["indices"] for record in read_records(single_records / "batches.rank0.jsonl")]
    ranks = [read_records(distributed_records / f"batches.rank{rank}.jsonl") for rank in (0, 1)]
    assert {record["store"] for records in ranks for record in records} == {str(store_dir)}
    assert [len(records) for records in ranks] == [6, 6] and len(single_batches) == 12
    for step, (first, second) in enumerate(zip(*ranks, strict=True)):
        assert not set(first["indices"]) & set(second["indices"])
        assert [first["indices"], second["indices"]] == single_batches[2 * step : 2 * step + 2]
    taken = [index for records in ranks for record in records for index in record["indices"]]
    assert len(taken) == len(set(taken)), "within one epoch no pair is trained on twice"

    single = load_file(str(single_dir / "checkpoints" / "step-00000006" / "model.safetensors"))
    distributed = load_file(str(distributed_dir / "checkpoints" / "step-00000006" / "model.safetensors"))
    for name, tensor in single.items():
        torch.testing.assert_close(distributed[name], tensor, rtol=1e-4, atol=1e-5)


@pytest.mark.slow
def test_two_processes_on_a_token_store_resume_after_sigkill_with_the_same_losses(
    tmp_path: Path, write_config
) -> None:
    """Both ranks killed mid-training, then ``--resume`` under torchrun: the losses of an uninterrupted job."""
    train = {"max_steps": 24, "checkpoint_every": 4, "validate_every": 0, "device": "cpu"}
    # Dropout stays on: each rank must get its own random state back. 24 steps cross 3 epoch boundaries.
    config = write_config(tmp_path, model=FIXED_ATTENTION, data={"token_store": True}, train=train)
    reference_dir = tmp_path / "uninterrupted"
    reference_records = tmp_path / "uninterrupted-records"
    finish(torchrun_train(config, reference_dir, reference_records), reference_records)

    killed_dir, killed_records = tmp_path / "killed", tmp_path / "killed-records"
    job = torchrun_train(config, killed_dir, killed_records)
    index_path = killed_dir / "checkpoints" / "index.json"
    deadline = time.monotonic() + 120
    while not index_path.exists() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    for rank in (0, 1):  # the workers themselves: torchrun would stop them gently
        with contextlib.suppress(ProcessLookupError):  # already done: the assertion below says so
            os.kill(int((killed_records / f"pid.rank{rank}").read_text()), signal.SIGKILL)
    job.wait(timeout=60)
    killed_at = int(read_index(killed_dir / "checkpoints")["latest"].split("-")[1])
    assert 4 <= killed_at < 24, "the job must be killed mid-training"

    resumed_records = tmp_path / "resumed-records"
    finish(torchrun_train(config, killed_dir, resumed_records, "--resume"), resumed_records)
    assert read_records(resumed_records / "builds.jsonl") == [], "the resumed job reuses the store"
    for rank in (0, 1):  # each rank goes on with the batches it would have taken next
        resumed_batches = read_records(resumed_records / f"batches.rank{rank}.jsonl")
        reference_batches = read_records(reference_records / f"batches.rank{rank}.jsonl")
        assert [record["indices"] for record in resumed_batches] == [
            record["indices"] for record in reference_batches[killed_at:]
        ]
    resumed, reference = train_losses(killed_dir), train_losses(reference_dir)
    for step in range(killed_at + 1, 25):
        assert resumed[step] == pytest.approx(reference[step], rel=1e-6, abs=1e-7)
    final = load_file(str(killed_dir / "checkpoints" / "step-00000024" / "model.safetensors"))
    expected = load_file(str(reference_dir / "checkpoints" / "step-00000024" / "model.safetensors"))
    for name, tensor in expected.items():
        torch.testing.assert_close(final[name], tensor, rtol=1e-5, atol=1e-6)


def test_more_processes_than_gpus_is_a_one_line_error(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto", local_rank=0) == torch.device("cuda:0")
    assert resolve_device("cuda:0", local_rank=1) == torch.device(
        "cuda:0"
    )  # an explicit GPU, whatever the rank
    with pytest.raises(ValueError, match=r"train.device='cuda:3': this machine has 1 GPU\(s\)"):
        resolve_device("cuda:3", local_rank=1)
    with pytest.raises(
        ValueError, match=r"local rank 1 has no GPU of its own \(1 visible\).*train.device=cpu"
    ):
        resolve_device("auto", local_rank=1)
