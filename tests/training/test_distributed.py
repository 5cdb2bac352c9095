import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from transformer.cli import main
from transformer.config import load_config
from transformer.device import resolve_device
from transformer.model.transformer import Transformer

#: Runs compared for equality name their attention path. "auto" is timed by each job, and on a busy machine the
#: answer is not cached, so two jobs can pick different paths; their rounding then differs, and Adam turns the
#: key projections' bias gradients (zero but for rounding: softmax ignores a shift shared by all keys) into
#: steps of about the learning rate.
FIXED_ATTENTION = {"attention_implementation": "fused"}


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


def test_more_processes_than_gpus_is_a_one_line_error(monkeypatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert resolve_device("auto", local_rank=0) == torch.device("cuda:0")
    assert resolve_device("cuda:3", local_rank=1) == torch.device("cuda:3")
    with pytest.raises(
        ValueError, match=r"local rank 1 has no GPU of its own \(1 visible\).*train.device=cpu"
    ):
        resolve_device("auto", local_rank=1)
