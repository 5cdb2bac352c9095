"""A tiny teacher trained once per session, and the tiny student config distilled from it."""

from pathlib import Path

import pytest

from tests.conftest import write_tiny_config
from transformer.cli import main


@pytest.fixture(scope="session")
def teacher_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1+1-layer d=32 model trained 60 steps on the tiny synthetic corpus (about 3 seconds)."""
    directory = tmp_path_factory.mktemp("teacher")
    config = write_tiny_config(
        directory, train={"max_steps": 60, "checkpoint_every": 30, "validate_every": 30}
    )
    run = directory / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run)]) == 0
    return run


def write_student_config(directory: Path, **distill: object) -> Path:
    """The tiny experiment as a 2+1-layer student: 8 steps, 64-line chunks, one thread per teacher process."""
    return write_tiny_config(
        directory,
        name="student.yaml",
        model={"num_encoder_layers": 2, "num_decoder_layers": 1},
        train={"max_steps": 8, "checkpoint_every": 4, "validate_every": 4, "keep_checkpoints": 3},
        distill={
            "chunk_lines": 64,
            "teacher_threads": 1,
            "average_last": 2,
            "teacher_beam_size": 2,
            **distill,
        },
    )
