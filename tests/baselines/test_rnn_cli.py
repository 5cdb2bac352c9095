"""The recurrent model through the unchanged commands: train, resume, translate, evaluate, average, refuse."""

import json
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from tests.conftest import requires_cpu_bf16, write_tiny_config
from transformer import device
from transformer.baselines import RNNConfig, RNNEncoderDecoder
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.checkpoint.weights import read_weights_metadata
from transformer.cli import main
from transformer.decoding.translator import Translator

RNN_MODEL = {
    "architecture": "rnn",
    "vocab_size": 150,
    "embedding_dim": 32,
    "hidden_size": 32,
    "num_encoder_layers": 1,
    "num_decoder_layers": 1,
    "dropout": 0.1,
    "attention": "general",
}


def write_rnn_config(directory: Path, name: str = "rnn.yaml", **train: object) -> Path:
    """The conftest's seconds-long experiment with a 1+1-layer, 32-unit LSTM in place of the Transformer."""
    path = write_tiny_config(directory, name, train={"peak_learning_rate": 0.01, **train})
    values = yaml.safe_load(path.read_text(encoding="utf-8"))
    values["model"] = dict(RNN_MODEL)
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return path


def train_losses(run_dir: Path) -> dict[int, float]:
    """The last training loss logged for each step."""
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return {record["step"]: record["train_loss"] for record in records if record["kind"] == "train"}


@pytest.fixture(scope="module")
def rnn_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny RNN trained once for this module (a few seconds)."""
    directory = tmp_path_factory.mktemp("rnn")
    config = write_rnn_config(directory, max_steps=30, validate_every=10, checkpoint_every=10)
    run_dir = directory / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    return run_dir


def test_training_learns_and_checkpoints_carry_the_architecture(rnn_run: Path) -> None:
    losses = train_losses(rnn_run)
    assert sorted(losses) == list(range(1, 31))
    assert losses[30] < losses[1] - 0.3
    checkpoint = load_checkpoint(rnn_run)
    assert isinstance(checkpoint.model_config, RNNConfig)
    metadata = read_weights_metadata(checkpoint.path / "model.safetensors")
    assert json.loads(metadata["model_config"])["architecture"] == "rnn"
    state = json.loads((checkpoint.path / "trainer_state.json").read_text())
    assert state["experiment"]["model"]["architecture"] == "rnn"
    model = checkpoint.build_model()
    assert isinstance(model, RNNEncoderDecoder) and model.src_embedding is model.tgt_embedding


def test_resume_continues_exactly(tmp_path: Path) -> None:
    config = write_rnn_config(tmp_path, max_steps=8, checkpoint_every=4, validate_every=4)
    reference_dir, resumed_dir = tmp_path / "uninterrupted", tmp_path / "resumed"
    assert main(["train", "--config", str(config), "--output-dir", str(reference_dir)]) == 0
    stopped = [
        "train",
        "--config",
        str(config),
        "--output-dir",
        str(resumed_dir),
        "--set",
        "train.max_steps=4",
    ]
    assert main(stopped) == 0
    assert sorted(train_losses(resumed_dir)) == [1, 2, 3, 4]
    assert main(["train", "--config", str(config), "--output-dir", str(resumed_dir), "--resume"]) == 0
    resumed, reference = train_losses(resumed_dir), train_losses(reference_dir)
    assert sorted(resumed) == list(range(1, 9))
    for step in range(5, 9):  # dropout, data order, Adam moments and schedule all continue where they were
        assert resumed[step] == pytest.approx(reference[step], rel=1e-6, abs=1e-7)
    final = load_file(str(resumed_dir / "checkpoints" / "step-00000008" / "model.safetensors"))
    expected = load_file(str(reference_dir / "checkpoints" / "step-00000008" / "model.safetensors"))
    assert final.keys() == expected.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(final[name], tensor, rtol=1e-5, atol=1e-6)


def test_resume_refuses_another_architecture(rnn_run: Path, capsys) -> None:
    transformer_config = write_tiny_config(rnn_run.parent, "transformer.yaml", train={"max_steps": 20})
    assert main(["train", "--config", str(transformer_config), "--output-dir", str(rnn_run), "--resume"]) == 2
    error = capsys.readouterr().err.splitlines()[-1]  # after the data preparation's messages
    assert error.startswith("transformer train: error: ") and error.endswith(
        "model config differs: model.architecture 'rnn' (checkpoint) != 'transformer'"
    )


def test_translate_and_evaluate_through_the_cli(rnn_run: Path, tmp_path: Path, capsys) -> None:
    source, references = rnn_run / "data" / "valid.en", rnn_run / "data" / "valid.de"
    arguments = [
        "translate",
        "--checkpoint",
        str(rnn_run),
        "--max-length-offset",
        "5",
        "--input",
        str(source),
    ]
    assert main([*arguments, "--output", str(tmp_path / "beam.de")]) == 0
    beam = (tmp_path / "beam.de").read_text(encoding="utf-8").splitlines()
    assert len(beam) == 30 and any(beam)
    assert main([*arguments, "--no-cache", "--output", str(tmp_path / "uncached.de")]) == 0
    assert (tmp_path / "uncached.de").read_text(encoding="utf-8").splitlines() == beam
    assert main([*arguments, "--beam", "3", "--nbest", "3"]) == 0
    nbest = capsys.readouterr().out.splitlines()
    assert len(nbest) == 90 and nbest[0].startswith("0\t")
    assert Translator.from_checkpoint(rnn_run, device="cpu").translate([""]) == [""]

    evaluate = [
        "evaluate",
        "--checkpoint",
        str(rnn_run),
        "--source",
        str(source),
        "--reference",
        str(references),
    ]
    assert main([*evaluate, "--beam", "1", "--max-length-offset", "5"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("perplexity ") and "BLEU" in out and "chrF2" in out
    assert float(out.split()[1]) < 150  # better than uniform over the vocabulary


def test_averaged_checkpoints_translate(rnn_run: Path, tmp_path: Path, capsys) -> None:
    averaged = tmp_path / "averaged"
    assert main(["average-checkpoints", "--run", str(rnn_run), "--last", "2", "--output", str(averaged)]) == 0
    assert isinstance(load_checkpoint(averaged).model_config, RNNConfig)
    source = rnn_run / "data" / "valid.en"
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(averaged), "--beam", "2", "--input", str(source)]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 30
    translator = Translator.from_checkpoint(averaged, device="cpu")
    assert isinstance(translator.model, RNNEncoderDecoder) and translator.decode_config.beam_size == 2


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            ["convert", "--to", "hf-marian", "{run}", "{out}"],
            "model.architecture='rnn' cannot be exported to HuggingFace Marian",
        ),
        (
            ["convert", "--to", "ctranslate2", "{run}", "{out}"],
            "model.architecture='rnn' cannot be exported to CTranslate2",
        ),
        (
            ["translate", "--checkpoint", "{run}", "--precision", "int8"],
            "precision='int8' quantizes Transformer models only",
        ),
        (
            ["attention", "--checkpoint", "{run}", "--text", "a", "--output-dir", "{out}"],
            "model.architecture is 'rnn'",
        ),
    ],
    ids=["hf-marian", "ctranslate2", "int8", "attention"],
)
def test_what_cannot_hold_an_rnn_is_refused_in_one_line(
    rnn_run: Path, tmp_path: Path, capsys, command: list[str], message: str
) -> None:
    arguments = [part.format(run=rnn_run, out=tmp_path / "out") for part in command]
    assert main(arguments) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1
    assert not (tmp_path / "out").exists()


@requires_cpu_bf16
def test_bf16_training_and_translation_run(tmp_path: Path) -> None:
    config = write_rnn_config(tmp_path, max_steps=2, precision="bf16", validate_every=0, checkpoint_every=0)
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "run")]) == 0
    assert all(torch.isfinite(torch.tensor(list(train_losses(tmp_path / "run").values()))))
    translator = Translator.from_checkpoint(tmp_path / "run", device="cpu", precision="bf16")
    assert next(translator.model.parameters()).dtype == torch.bfloat16
    text = (tmp_path / "run" / "data" / "valid.en").read_text(encoding="utf-8").splitlines()[0]
    assert len(translator.translate([text])) == 1


def test_bf16_without_native_support_is_refused_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    # A faked probe: what a CPU with AVX2 and FMA only (oneDNN has no bf16 LSTM there) answers.
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: False)
    config = write_rnn_config(tmp_path, max_steps=2, precision="bf16", validate_every=0, checkpoint_every=0)
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "run")]) == 2
    error = capsys.readouterr().err.splitlines()[-1]
    assert error.startswith("transformer train: error: train.precision='bf16': this CPU has no native bf16 (")
    assert error.endswith("and has no bf16 LSTM; use precision auto or fp32")
    assert not (tmp_path / "run" / "checkpoints").exists()
