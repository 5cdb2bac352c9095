"""fp32 linear layers through oneDNN: the layer, the swap by shape and role, and translations unchanged."""

import copy
from pathlib import Path

import pytest
import torch
from torch import nn

from transformer import TransformerConfig
from transformer.cli import main
from transformer.config.decode import DecodeConfig
from transformer.decoding.translator import Translator
from transformer.model import fp32_kernels
from transformer.model.fp32_kernels import (
    OneDNNLinear,
    OneDNNMultiHeadAttention,
    onednn_linear_unavailable_reason,
    swap_fp32_linear_layers,
)
from transformer.model.multihead_attention import MultiHeadAttention
from transformer.model.transformer import Transformer
from transformer.serving.config import ServeConfig
from transformer.serving.served_model import load_served_model

requires_onednn = pytest.mark.skipif(
    onednn_linear_unavailable_reason() is not None, reason=str(onednn_linear_unavailable_reason())
)
SENTENCES = ["the cat sees the dog", "a small house", "", "the dog runs to the small cat", "dog"]


def tiny_model(tie: bool) -> Transformer:
    config = TransformerConfig(
        vocab_size=40,
        d_model=32,
        d_ff=64,
        num_heads=4,
        num_encoder_layers=2,
        num_decoder_layers=2,
        dropout=0.0,
        tie_output_projection=tie,
    )
    return Transformer(config).eval()


@requires_onednn
@pytest.mark.parametrize("with_bias", [True, False])
def test_onednn_linear_equals_f_linear_to_float32_rounding(with_bias: bool) -> None:
    linear = nn.Linear(48, 24, bias=with_bias)
    hidden = torch.randn(3, 5, 48)
    layer = OneDNNLinear.from_linear(linear)
    with torch.inference_mode():
        output, expected = layer(hidden), linear(hidden)
    assert output.shape == (3, 5, 24) and output.dtype == torch.float32
    torch.testing.assert_close(output, expected, rtol=1e-5, atol=1e-5)
    assert layer.weight is None and "in_features=48, out_features=24, fp32 oneDNN" in repr(layer)
    with torch.no_grad():
        linear.weight.mul_(2.0)  # the packed copy does not follow the original
    with torch.inference_mode():
        torch.testing.assert_close(layer(hidden), output)


def test_the_chooser_is_asked_for_each_product_with_its_role() -> None:
    asked: set[tuple[int, int, str]] = set()

    def record(in_features: int, out_features: int, role: str) -> str:
        asked.add((in_features, out_features, role))
        return "mkl"

    model = tiny_model(tie=True)
    attention = model.decoder.layers[0].self_attention
    swap_fp32_linear_layers(model, record)
    assert asked == {
        (32, 96, "encoder"),  # stacked q/k/v of self-attention
        (32, 32, "encoder"),  # the encoder's own projections, and cross-attention's keys and values
        (32, 64, "encoder"),
        (64, 32, "encoder"),
        (32, 96, "decoder"),
        (32, 32, "decoder"),  # queries and outputs of both attentions
        (32, 64, "decoder"),
        (64, 32, "decoder"),
        (32, 40, "decoder"),  # the output projection, tied to the target embedding
    }
    assert model.output_projection is None  # "mkl" everywhere: no layer replaced by a oneDNN one
    assert not any(isinstance(module, OneDNNLinear) for module in model.modules())
    # Untouched, not copied: the module still follows its parameters (the server's NaN test edits them).
    assert model.decoder.layers[0].self_attention is attention
    assert not any(isinstance(module, OneDNNMultiHeadAttention) for module in model.modules())


@requires_onednn
@pytest.mark.parametrize("tie", [True, False])
def test_a_model_swapped_by_role_keeps_its_outputs(tie: bool) -> None:
    model = tiny_model(tie)
    swapped = swap_fp32_linear_layers(
        copy.deepcopy(model), lambda in_features, out_features, role: "onednn" if role == "decoder" else "mkl"
    )
    layer = swapped.decoder.layers[0]
    assert isinstance(layer.cross_attention, OneDNNMultiHeadAttention)
    assert isinstance(layer.cross_attention.q_proj, OneDNNLinear)
    assert isinstance(layer.cross_attention.k_proj, nn.Linear)  # keys of the encoder output: encoder rows
    assert isinstance(layer.self_attention.qkv_proj, OneDNNLinear)
    assert isinstance(layer.feed_forward.linear_in, OneDNNLinear)
    assert isinstance(swapped.encoder.layers[0].feed_forward.linear_in, nn.Linear)
    assert type(swapped.encoder.layers[0].self_attention) is MultiHeadAttention  # all on MKL: left as it was
    projection = swapped.output_projection
    assert isinstance(projection, OneDNNLinear) and projection.weight is not None  # dense rows for shortlists
    src_tokens = torch.tensor([[5, 9, 12, 2], [7, 8, 2, 0]])
    tgt_tokens = torch.tensor([[1, 6, 7], [1, 9, 3]])
    with torch.inference_mode():
        torch.testing.assert_close(swapped(src_tokens, tgt_tokens), model(src_tokens, tgt_tokens))


@requires_onednn
def test_a_second_translator_over_a_swapped_model_decodes_the_same(trained_run: Path) -> None:
    # The swap works in place; a second Translator over the same model rebuilt swapped attention from its
    # weightless layers (AttributeError 'NoneType' object has no attribute 'shape').
    mkl = Translator.from_checkpoint(trained_run, device="cpu", fp32_kernels="mkl")
    model = copy.deepcopy(mkl.model)
    first = Translator(model, mkl.tokenizer, device="cpu", fp32_kernels="onednn")
    second = Translator(model, mkl.tokenizer, device="cpu", fp32_kernels="onednn")
    assert isinstance(second.model.output_projection, OneDNNLinear)
    assert isinstance(second.model.decoder.layers[0].feed_forward.linear_in, OneDNNLinear)
    assert second.translate(SENTENCES) == first.translate(SENTENCES)


def test_onednn_is_reported_unavailable_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: False)
    assert onednn_linear_unavailable_reason() == (
        "this PyTorch build has no oneDNN (torch.backends.mkldnn.is_available() is False)"
    )
    monkeypatch.undo()

    def broken(*arguments: object) -> torch.Tensor:
        raise RuntimeError("no kernel for this CPU\nsecond line")

    monkeypatch.setattr(fp32_kernels, "_onednn_linear", broken)
    assert onednn_linear_unavailable_reason() == "oneDNN's fp32 linear failed to run (no kernel for this CPU)"
    monkeypatch.setattr(fp32_kernels, "_onednn_linear", lambda hidden, weight, bias: hidden.new_zeros(3, 8))
    assert onednn_linear_unavailable_reason() == "oneDNN's fp32 linear gave a result different from F.linear"


@requires_onednn
@pytest.mark.parametrize("beam_size", [1, 4])
def test_translations_through_onednn_equal_those_through_mkl(trained_run: Path, beam_size: int) -> None:
    search = DecodeConfig(beam_size=beam_size, max_length_offset=8)
    mkl = Translator.from_checkpoint(trained_run, search, "cpu", "fp32", fp32_kernels="mkl")
    onednn = Translator.from_checkpoint(trained_run, search, "cpu", "fp32", fp32_kernels="onednn")
    assert isinstance(onednn.model.output_projection, OneDNNLinear)
    assert isinstance(onednn.model.decoder.layers[0].feed_forward.linear_out, OneDNNLinear)
    assert not any(isinstance(module, OneDNNLinear) for module in mkl.model.modules())
    assert onednn.kernel_notes[0] == "fp32 kernels: onednn everywhere, as asked"
    assert mkl.kernel_notes[0] == "fp32 kernels: mkl (F.linear) everywhere, as asked"
    assert all(
        notes[1].startswith("native decoder step: ") for notes in (onednn.kernel_notes, mkl.kernel_notes)
    )
    texts = onednn.translate(SENTENCES)
    assert texts == mkl.translate(SENTENCES)
    assert texts[2] == "" and sum(bool(text) for text in texts) >= 3  # non-empty searches compared


def test_onednn_is_refused_outside_fp32_on_the_cpu(trained_run: Path) -> None:
    translator = Translator.from_checkpoint(trained_run, device="cpu")
    with pytest.raises(
        ValueError, match=r"^fp32_kernels 'onednn' applies to precision 'fp32' on the CPU, not 'int8'"
    ):
        Translator(
            translator.model, translator.tokenizer, device="cpu", precision="int8", fp32_kernels="onednn"
        )
    with pytest.raises(ValueError, match=r"^fp32_kernels 'fast' is not one of auto, mkl, onednn$"):
        Translator(translator.model, translator.tokenizer, device="cpu", fp32_kernels="fast")


def test_a_non_float32_model_is_refused() -> None:
    with pytest.raises(
        ValueError, match=r"^oneDNN fp32 kernels need a float32 model on the CPU, got torch\.bfloat16 on cpu$"
    ):
        swap_fp32_linear_layers(tiny_model(True).to(torch.bfloat16), lambda *shape: "onednn")


@requires_onednn
def test_translate_and_serve_take_fp32_kernels(trained_run: Path, tmp_path: Path, capsys) -> None:
    sources = tmp_path / "in.en"
    sources.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    common = ["translate", "--checkpoint", str(trained_run), "--input", str(sources), "--device", "cpu"]
    outputs = []
    for kernels in ("mkl", "onednn", "auto"):
        assert main([*common, "--beam", "2", "--fp32-kernels", kernels]) == 0, capsys.readouterr().err
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2] and len(outputs[0].splitlines()) == len(SENTENCES)
    assert main([*common, "--precision", "int8", "--fp32-kernels", "onednn"]) != 0
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [
        "transformer translate: error: --fp32-kernels onednn applies to --precision fp32, not int8"
    ]
    assert main([*common, "--fp32-kernels", "fastest"]) != 0
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "transformer translate: error: argument --fp32-kernels: invalid choice: 'fastest' "
        "(choose from 'auto', 'mkl', 'onednn')"
    )
    with pytest.raises(ValueError, match=r"^ServeConfig.fp32_kernels"):
        ServeConfig(checkpoints={"default": (trained_run,)}, fp32_kernels="fastest")
    served = load_served_model("default", [trained_run], "pytorch", "cpu", "fp32", "onednn")
    assert served.translator is not None and served.translator.fp32_kernels == "onednn"
    assert isinstance(served.engine_model.output_projection, OneDNNLinear)
