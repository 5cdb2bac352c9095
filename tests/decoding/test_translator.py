"""Translator precisions: validation, int8 loaded from a checkpoint, and its refusal on GPUs."""

import copy
from pathlib import Path

import pytest
import torch

from tests.conftest import requires_cpu_bf16
from transformer import device
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.config.decode import DecodeConfig
from transformer.decoding.inference_models import TRANSLATION_PRECISIONS
from transformer.decoding.translator import Translator
from transformer.model.quantization import Int8Linear, quantize_for_inference

SENTENCES = ["the cat sees the dog", "a small house", "", "the dog runs to the small cat"]


def test_precisions_are_the_three_paths() -> None:
    assert TRANSLATION_PRECISIONS == ("fp32", "bf16", "int8")


def test_int8_from_checkpoint_quantises_the_loaded_weights(trained_run: Path) -> None:
    greedy = DecodeConfig(beam_size=1, max_length_offset=5)
    translator = Translator.from_checkpoint(trained_run, greedy, "cpu", "int8")
    assert translator.precision == "int8"
    assert isinstance(translator.model.output_projection, Int8Linear)
    # The same as quantising the float32 checkpoint by hand for the engine the probe chose: nothing else happens.
    engine = translator.model.output_projection.engine
    expected_model = quantize_for_inference(load_checkpoint(trained_run).build_model(), engine)
    src_tokens = torch.tensor([[5, 9, 12, 2], [7, 8, 2, 0]])
    with torch.inference_mode():
        assert torch.equal(translator.model.encode(src_tokens), expected_model.encode(src_tokens))
    fp32_texts = Translator.from_checkpoint(trained_run, greedy, "cpu", "fp32").translate(SENTENCES)
    int8_texts = translator.translate(SENTENCES)
    assert int8_texts[2] == "" and len(int8_texts) == len(SENTENCES)
    assert sum(ours == theirs for ours, theirs in zip(int8_texts, fp32_texts, strict=True)) >= 3


def test_int8_is_refused_on_a_gpu_with_the_reason(trained_run: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No GPU needed: the check looks at the resolved device before anything moves to it.
    monkeypatch.setattr(
        "transformer.decoding.translator.resolve_device", lambda requested, option: torch.device("cuda")
    )
    checkpoint = load_checkpoint(trained_run)
    tokenizer = load_checkpoint_tokenizer(checkpoint.path)
    with pytest.raises(ValueError, match=r"'int8' runs on the CPU only.*use precision='bf16'"):
        Translator(checkpoint.build_model(), tokenizer, device="cuda", precision="int8")


def test_unknown_precision_names_the_choices(trained_run: Path) -> None:
    with pytest.raises(ValueError, match=r"precision='fp16' is not one of \('fp32', 'bf16', 'int8'\)"):
        Translator.from_checkpoint(trained_run, device="cpu", precision="fp16")


@requires_cpu_bf16
def test_bf16_casts_and_fp32_keeps_the_model(trained_run: Path) -> None:
    checkpoint = load_checkpoint(trained_run)
    tokenizer = load_checkpoint_tokenizer(checkpoint.path)
    model = checkpoint.build_model()
    bf16 = Translator(copy.deepcopy(model), tokenizer, device="cpu", precision="bf16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    fp32 = Translator(model, tokenizer, device="cpu", precision="fp32")
    assert fp32.model is model and next(model.parameters()).dtype == torch.float32


@pytest.mark.parametrize("native", [False, True])
def test_bf16_is_refused_where_the_cpu_only_emulates_it(trained_run: Path, monkeypatch, native: bool) -> None:
    # Both answers of the probe, faked, so the decision is tested on every CPU kind.
    monkeypatch.setattr(device, "cpu_has_native_bf16", lambda: native)
    checkpoint = load_checkpoint(trained_run)
    tokenizer = load_checkpoint_tokenizer(checkpoint.path)
    model = checkpoint.build_model()
    if native:
        translator = Translator(model, tokenizer, device="cpu", precision="bf16")
        assert next(translator.model.parameters()).dtype == torch.bfloat16
        return
    with pytest.raises(
        ValueError, match=r"^precision='bf16': this CPU has no native bf16 \(.*\): oneDNN emulates"
    ):
        Translator(model, tokenizer, device="cpu", precision="bf16")
    assert next(model.parameters()).dtype == torch.float32  # refused before the model was cast


def test_a_prefix_longer_than_any_translation_may_be_is_refused_naming_the_line(
    trained_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A 3,000-word prefix line forced 4,200 decoder steps, one at a time: no output within 300 s."""
    from transformer.cli import main

    translator = Translator.from_checkpoint(trained_run, device="cpu")
    long_prefix = "ein hund " * 1500
    prefix_tokens = len(translator.tokenizer.encode_target(long_prefix))
    limit = translator.max_input_tokens + translator.decode_config.max_length_offset
    assert prefix_tokens > limit
    (tmp_path / "src.en").write_text("a dog sleeps .\na cat .\n", encoding="utf-8")
    (tmp_path / "prefix.de").write_text(f"ein\n{long_prefix}\n", encoding="utf-8")
    output = tmp_path / "out.de"
    command = ["translate", "--checkpoint", str(trained_run), "--input", str(tmp_path / "src.en")]
    status = main([*command, "--prefix-file", str(tmp_path / "prefix.de"), "--output", str(output)])
    error = capsys.readouterr().err.strip()
    assert status == 2 and not output.exists()
    offset = translator.decode_config.max_length_offset
    assert error == (
        f"transformer translate: error: --prefix-file {tmp_path / 'prefix.de'}:2: the prefix is {prefix_tokens:,} "
        f"tokens, more than the {limit:,} any translation may have (--max-length-offset {offset} past the "
        f"{translator.max_input_tokens:,}-token input limit)"
    )
    # A prefix longer than its own line's limit (source + offset), e.g. another line's whole translation, is
    # still forced whole: it wins over its line's limits.
    prefix = translator.tokenizer.decode(translator.tokenizer.encode_target(long_prefix)[:60])
    forced = translator.tokenizer.encode_target(prefix)
    assert len(forced) > len(translator.tokenizer.encode("a cat .")) + 1 + offset
    (candidate,) = translator.translate_nbest(["a cat ."], prefixes=[prefix])[0][:1]
    assert candidate.tokens[: len(forced)] == forced
