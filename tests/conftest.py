"""Shared fixtures: a fixed seed, a tiny model config, and a tiny end-to-end experiment."""

import os
from pathlib import Path

import pytest
import torch
import yaml

from transformer import TransformerConfig
from transformer.cli import main
from transformer.device import bf16_unsupported_reason, describe_cpu
from transformer.kernels.native_build import build_native_extension
from transformer.model.quantization import int8_packing_engine

# A helper module whose asserts fail tests: pytest rewrites only test modules' asserts unless told, and a
# bare ``assert`` in a helper would fail with no values shown.
pytest.register_assert_rewrite("tests.decoding.assertions")

#: Why this machine's CPU cannot run bf16 (None where it can): probed from oneDNN, never assumed.
CPU_BF16_UNSUPPORTED = bf16_unsupported_reason(torch.device("cpu"))
#: For tests that really run bf16 on the CPU; the decision itself is tested both ways with a faked probe.
requires_cpu_bf16 = pytest.mark.skipif(CPU_BF16_UNSUPPORTED is not None, reason=str(CPU_BF16_UNSUPPORTED))


def pytest_report_header() -> list[str]:
    """Name the CPU kind in the report's header: the machines differ, and so do the tests they skip.

    Also builds the native decoder step first (30-40 s the first time on a machine), so that a server started
    by a test, which has its seconds to become ready, loads the built library instead of compiling it.
    """
    native = "native bf16" if CPU_BF16_UNSUPPORTED is None else "no native bf16: bf16 tests skipped"
    header = f"cpu: {describe_cpu()}; {native}; torch {torch.__version__}, {torch.get_num_threads()} threads"
    return [header, build_native_extension().note]


@pytest.fixture(autouse=True)
def fixed_seed() -> None:
    torch.manual_seed(1234)


@pytest.fixture(autouse=True, scope="session")
def private_probe_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Keep the automatic-default probes' answers out of the user's cache (subprocesses inherit it)."""
    os.environ["TRANSFORMER_CACHE_DIR"] = str(tmp_path_factory.mktemp("transformer-cache"))
    # One int8 engine for the whole run: on a busy machine the probe's answers are not stored, and two int8
    # translators compared with each other (the server against the offline command) must pack alike.
    os.environ.setdefault("TRANSFORMER_INT8_ENGINE", int8_packing_engine())


@pytest.fixture
def tiny_config() -> TransformerConfig:
    return TransformerConfig(
        vocab_size=40,
        d_model=32,
        d_ff=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
    )


def write_tiny_config(directory: Path, name: str = "tiny.yaml", **sections: dict) -> Path:
    """A seconds-long experiment: 300 synthetic pairs, a 1+1-layer d=32 model, fp32, one thread."""
    values: dict = {
        "model": {
            "vocab_size": 150,
            "d_model": 32,
            "d_ff": 64,
            "num_heads": 4,
            "num_encoder_layers": 1,
            "num_decoder_layers": 1,
            "dropout": 0.1,
        },
        "data": {
            "corpus": "synthetic",
            "synthetic_train_pairs": 300,
            "synthetic_valid_pairs": 30,
            "synthetic_test_pairs": 30,
            "synthetic_seed": 5,
            "max_len": 48,
        },
        "train": {
            "max_tokens": 600,
            "max_steps": 12,
            "warmup_steps": 4,
            "peak_learning_rate": 0.003,
            "precision": "fp32",
            "threads": 1,
            "log_every": 1,
            "validate_every": 4,
            "checkpoint_every": 4,
            "keep_checkpoints": 2,
            "seed": 3,
        },
        "decode": {"beam_size": 2, "max_length_offset": 10},
    }
    for section, updates in sections.items():
        values.setdefault(section, {}).update(updates)
    path = directory / name
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


@pytest.fixture
def write_config():
    """The :func:`write_tiny_config` helper, for tests to vary the tiny experiment."""
    return write_tiny_config


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny run trained once per session (about 2 seconds)."""
    directory = tmp_path_factory.mktemp("trained")
    config = write_tiny_config(directory, train={"max_steps": 24})
    run_dir = directory / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="session")
def served_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny model trained for 300 steps (a few seconds): varied translations, not one repeated token."""
    directory = tmp_path_factory.mktemp("served")
    config = write_tiny_config(
        directory,
        model={"dropout": 0.0},
        train={"max_steps": 300, "validate_every": 100, "checkpoint_every": 100},
    )
    run_dir = directory / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    return run_dir


@pytest.fixture(scope="session")
def valid_sentences(served_run: Path) -> list[str]:
    """The tiny corpus's validation sources: sentences of mixed lengths the model has not trained on."""
    lines = (served_run / "data" / "valid.en").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()]


@pytest.fixture(scope="session")
def onnx_export(served_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``convert --to onnx --quantization int8`` of :func:`served_run` (fp32 and int8 graphs; ~10 seconds)."""
    for package in ("onnx", "onnxscript", "onnxruntime"):
        pytest.importorskip(package)
    output = tmp_path_factory.mktemp("onnx") / "export"
    assert main(["convert", "--to", "onnx", str(served_run), str(output), "--quantization", "int8"]) == 0
    return output
