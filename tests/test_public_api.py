import dataclasses
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import transformer
from transformer import DecodeConfig
from transformer.model.masks import build_padding_mask

README = Path(__file__).resolve().parents[1] / "README.md"

#: Where each public name is defined: ``from transformer import NAME`` must give that very object.
DEFINED_IN = {
    "AdditiveScore": "transformer.model.additive_attention",
    "AttentionWeights": "transformer.model.transformer",
    "DataConfig": "transformer.config.data",
    "DecodeConfig": "transformer.config.decode",
    "Decoder": "transformer.model.decoder",
    "Encoder": "transformer.model.encoder",
    "ExperimentConfig": "transformer.config.experiment",
    "Glossary": "transformer.decoding.glossary",
    "MultiHeadAttention": "transformer.model.multihead_attention",
    "RNNConfig": "transformer.baselines.rnn_config",
    "RNNEncoderDecoder": "transformer.baselines.rnn",
    "TrainConfig": "transformer.config.train",
    "Transformer": "transformer.model.transformer",
    "TransformerConfig": "transformer.model.config",
    "Translator": "transformer.decoding.translator",
    "additive_attention": "transformer.model.additive_attention",
    "load_config": "transformer.config.files",
    "scaled_dot_product_attention": "transformer.model.scaled_dot_product_attention",
}


def test_all_lists_the_public_api() -> None:
    assert sorted(transformer.__all__) == sorted(DEFINED_IN)
    assert "Translator" in dir(transformer)


@pytest.mark.parametrize("name", sorted(DEFINED_IN))
def test_every_public_name_imports_from_the_package(name: str) -> None:
    namespace: dict = {}
    exec(f"from transformer import {name}", namespace)
    assert namespace[name] is getattr(importlib.import_module(DEFINED_IN[name]), name)


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="module 'transformer' has no attribute 'Translater'"):
        transformer.Translater  # noqa: B018
    with pytest.raises(ImportError, match="Translater"):
        exec("from transformer import Translater", {})


def test_importing_the_package_leaves_the_heavy_optional_parts_unloaded() -> None:
    # A fresh interpreter: this one has imported everything already.
    code = (
        "import sys, transformer; "
        "print(sorted(name for name in ('sentencepiece', 'sacrebleu', 'matplotlib', 'safetensors', "
        "'transformer.decoding.translator') if name in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "[]\n"


def test_the_readme_library_example_runs(trained_run: Path, tmp_path: Path, monkeypatch) -> None:
    section = README.read_text(encoding="utf-8").split("## The library", 1)[1].split("\n## ", 1)[0]
    code = "\n".join(re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL))
    assert "from transformer import" in code and "Translator.from_checkpoint" in code
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "quickstart").symlink_to(trained_run)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(code, f"{README}: The library", "exec"), namespace)
    model, translator, greedy = namespace["model"], namespace["translator"], namespace["greedy"]
    assert model.num_parameters() == 63_082_496  # the figure the README's comment gives
    assert (model.config.d_model, model.config.d_ff, model.config.num_heads) == (512, 2048, 8)
    assert tuple(namespace["logits"].shape) == (1, 3, 37000) and torch.isfinite(namespace["logits"]).all()
    # In evaluation mode (no dropout) the forward pass is encode, then decode against the source's padding.
    src, tgt = namespace["src"], namespace["tgt"]
    model.eval()
    with torch.no_grad():
        expected = model.decode(tgt, model.encode(src), build_padding_mask(src, model.config.pad_id))
        torch.testing.assert_close(model(src, tgt), expected, atol=1e-5, rtol=1e-5)
    # The run's checkpoint and its search; the greedy translator differs only in its beam.
    # The run's search (the tiny config's decode section), and the greedy one differs in its beam only.
    assert (translator.decode_config.beam_size, translator.decode_config.max_length_offset) == (2, 10)
    assert greedy.decode_config == dataclasses.replace(DecodeConfig(), beam_size=1)
    assert namespace["translations"] == translator.translate(["The sad girls cannot take letters."])
    assert namespace["translations"][0].strip() != ""
    assert "Mädchen" in re.findall(r"\w+", namespace["with_terms"][0])
