"""The native (C++) decoder step: the Python step's log-probabilities bit for bit, and its fallbacks."""

import dataclasses
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import CPU_BF16_UNSUPPORTED
from transformer import TransformerConfig
from transformer.config.decode import DecodeConfig
from transformer.decoding.cache_rows import reorder_decoder_cache
from transformer.decoding.checkpoint_shortlist import build_checkpoint_shortlist
from transformer.decoding.step_model import TransformerStepModel
from transformer.decoding.translator import Translator
from transformer.kernels import native_build
from transformer.kernels import native_step as native_step_module
from transformer.kernels.native_step import (
    NativeDecoderStep,
    build_native_extension,
    native_decoder_step,
    unsupported_reason,
)
from transformer.model.fp32_kernels import onednn_linear_unavailable_reason, swap_fp32_linear_layers
from transformer.model.quantization import quantize_for_inference
from transformer.model.transformer import Transformer


def built_extension():  # type: ignore[no-untyped-def]
    """The extension, or a skip naming the probed reason it cannot be built here (no compiler, no ninja)."""
    build = build_native_extension()
    if build.module is None:
        pytest.skip(build.note)
    return build.module


def int8_model(config: TransformerConfig, seed: int = 0) -> Transformer:
    torch.manual_seed(seed)
    return quantize_for_inference(Transformer(config).eval())


def prepared_model(config: TransformerConfig, precision: str) -> Transformer:
    """A random model as the translator prepares it: int8, fp32 (dense or every product on oneDNN) or bf16."""
    if precision == "int8":
        return int8_model(config)
    torch.manual_seed(0)
    model = Transformer(config).eval()
    if precision == "bf16" and CPU_BF16_UNSUPPORTED is not None:
        pytest.skip(CPU_BF16_UNSUPPORTED)  # probed: oneDNN refuses some bf16 primitives on AVX2-only CPUs
    if precision == "fp32-onednn":
        reason = onednn_linear_unavailable_reason()
        if reason is not None:
            pytest.skip(reason)
        return swap_fp32_linear_layers(model, lambda in_features, out_features, role: "onednn")
    return model.to(torch.bfloat16) if precision == "bf16" else model


def sources(config: TransformerConfig) -> torch.Tensor:
    """Three sources: a full one, a shorter one right-padded, and one all padding (no key to attend to)."""
    generator = torch.Generator().manual_seed(1)
    tokens = torch.randint(4, config.vocab_size, (3, 7), generator=generator)
    tokens[:, -1] = config.eos_id
    tokens[1, 4:] = config.pad_id
    tokens[1, 3] = config.eos_id
    tokens[2] = config.pad_id
    return tokens


def run_steps(step_model: TransformerStepModel, src: torch.Tensor, beam: int) -> list[torch.Tensor]:
    """Decode six steps as beam search lays rows out (beams of a source adjacent), reordering between steps."""
    with torch.inference_mode():
        state = step_model.start(src)
        assert state.cache is not None
        rows = torch.arange(src.size(0)).repeat_interleave(beam)
        reorder_decoder_cache(state.cache, rows)
        last = torch.full((rows.numel(),), step_model.model.config.bos_id)
        outputs = []
        for step in range(6):
            log_probs = step_model.log_probs(state, last)
            outputs.append(log_probs)
            last = log_probs.topk(2, dim=-1).indices[:, step % 2]
            # Swap the two beams of the first source: rows follow their hypotheses.
            order = torch.arange(rows.numel())
            if beam > 1:
                order[0], order[1] = 1, 0
            reorder_decoder_cache(state.cache, order)
            last = last[order]
        return outputs


VARIANTS = {
    "pre-norm relu sinusoidal": {},
    "post-norm gelu learned": {"norm_first": False, "activation": "gelu", "positional_encoding": "learned"},
    "silu, no positions, unscaled": {
        "activation": "silu",
        "positional_encoding": "none",
        "attention_scaling": "none",
    },
    "fused attention, 1/d_k": {"attention_implementation": "fused", "attention_scaling": "linear"},
    "explicit attention, untied output, bias": {
        "attention_implementation": "explicit",
        "tie_output_projection": False,
        "share_embeddings": False,
        "output_bias": True,
    },
}


@pytest.mark.parametrize("precision", ["int8", "fp32", "fp32-onednn", "bf16"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("beam", [1, 2])
def test_native_log_probs_equal_the_python_step_bit_for_bit(
    tiny_config: TransformerConfig, variant: str, beam: int, precision: str
) -> None:
    extension = built_extension()
    config = dataclasses.replace(tiny_config, **VARIANTS[variant])
    model = prepared_model(config, precision)
    assert unsupported_reason(model) is None
    src = sources(config)
    python_outputs = run_steps(TransformerStepModel(model), src, beam)
    native_outputs = run_steps(
        TransformerStepModel(model, native_step=NativeDecoderStep(model, extension)), src, beam
    )
    for python_log_probs, native_log_probs in zip(python_outputs, native_outputs, strict=True):
        assert torch.equal(python_log_probs, native_log_probs)
    # The all-padding source attends to nothing and gets zeros there, never NaN.
    assert all(not bool(torch.isnan(out).any()) for out in native_outputs)


def test_the_sinusoidal_table_grows_past_its_initial_length(tiny_config: TransformerConfig) -> None:
    extension = built_extension()
    model = int8_model(tiny_config)
    step = NativeDecoderStep(model, extension)
    assert step.position_table is not None
    initial_rows = step.position_table.size(0)
    src = sources(tiny_config)
    with torch.inference_mode():
        python_state = TransformerStepModel(model).start(src)
        native_state = TransformerStepModel(model).start(src)
        assert python_state.cache is not None and native_state.cache is not None
        python_state.cache.decoded_len = native_state.cache.decoded_len = (
            initial_rows  # as if that long already
        )
        last = torch.full((3,), tiny_config.bos_id)
        expected = TransformerStepModel(model).log_probs(python_state, last)
        actual = step.log_probs(native_state.cache, last)
    assert torch.equal(expected, actual)
    assert step.position_table.size(0) > initial_rows
    assert native_state.cache.decoded_len == initial_rows + 1


@pytest.mark.parametrize("precision", ["int8", "fp32"])
@pytest.mark.parametrize("shortlist", [False, True])
def test_translations_are_the_python_steps_in_greedy_and_beam_search(
    trained_run: Path, tmp_path: Path, precision: str, shortlist: bool
) -> None:
    built_extension()
    run = trained_run
    if shortlist:
        run = tmp_path / "run"
        shutil.copytree(trained_run, run)
        build_checkpoint_shortlist(run, per_source=3, frequent=5)
    translator = Translator.from_checkpoint(run, device="cpu", precision=precision, shortlist=shortlist)
    assert translator.native_steps, translator.kernel_notes
    assert any(note.startswith("native decoder step: C++") for note in translator.kernel_notes)
    sentences = ["the cat sat on the mat", "a dog runs", "two birds fly over the green hill today"]
    saved = dict(translator.native_steps)
    for beam_size in (1, 4):
        translator.decode_config = DecodeConfig(beam_size=beam_size, nbest=2 if beam_size > 1 else 1)
        native = translator.translate_nbest(sentences)
        translator.native_steps.clear()
        python = translator.translate_nbest(sentences)
        translator.native_steps.update(saved)
        assert [[(c.text, c.score) for c in n] for n in native] == [
            [(c.text, c.score) for c in p] for p in python
        ]


def test_unsupported_models_keep_the_python_step(tiny_config: TransformerConfig) -> None:
    torch.manual_seed(0)
    additive = Transformer(dataclasses.replace(tiny_config, attention_scoring="additive")).eval()
    step, note = native_decoder_step(additive)
    assert step is None
    assert note == "native decoder step: not used (additive attention or a logits hook)"
    windowed = int8_model(dataclasses.replace(tiny_config, attention_window=3))
    assert unsupported_reason(windowed) == "windowed self-attention"
    training = int8_model(tiny_config).train()
    assert unsupported_reason(training) == "the model is in training mode"


def test_the_variable_turns_it_off_and_a_missing_compiler_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    build_native_extension.cache_clear()
    try:
        monkeypatch.setenv(native_build.NATIVE_STEP_VARIABLE, "off")
        off = build_native_extension()
        assert off.module is None
        assert off.note == "native decoder step: off (TRANSFORMER_NATIVE_STEP=off)"
        build_native_extension.cache_clear()
        monkeypatch.setenv(native_build.NATIVE_STEP_VARIABLE, "of")
        typo = build_native_extension()
        assert typo.module is None
        assert typo.note == "native decoder step: off (TRANSFORMER_NATIVE_STEP='of' is not on or off)"
        build_native_extension.cache_clear()
        monkeypatch.delenv(native_build.NATIVE_STEP_VARIABLE)
        monkeypatch.setenv("CXX", "no-such-compiler-here")
        missing = build_native_extension()
        assert missing.module is None
        assert missing.note == "native decoder step: no C++ compiler ('no-such-compiler-here' not on PATH)"
    finally:
        build_native_extension.cache_clear()


def test_a_weight_changed_in_place_is_seen_as_the_python_step_sees_it(tiny_config: TransformerConfig) -> None:
    extension = built_extension()
    model = prepared_model(tiny_config, "fp32")
    native = NativeDecoderStep(model, extension)
    src = sources(tiny_config)
    before = run_steps(TransformerStepModel(model, native_step=native), src, 1)
    layer = model.decoder.layers[0]
    with torch.no_grad():  # the stacked q/k/v weight is the C++ step's one copy; a norm is shared as is
        layer.self_attention.k_proj.weight.mul_(2.0)
        layer.feed_forward_residual.norm.weight.add_(0.5)
    python_after = run_steps(TransformerStepModel(model), src, 1)
    native_after = run_steps(TransformerStepModel(model, native_step=native), src, 1)
    assert not torch.equal(before[-1], native_after[-1])
    for expected, actual in zip(python_after, native_after, strict=True):
        assert torch.equal(expected, actual)


@pytest.mark.parametrize("precision", ["int8", "fp32", "fp32-onednn", "bf16"])
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_native_encoding_and_cache_equal_the_python_ones_bit_for_bit(
    tiny_config: TransformerConfig, variant: str, precision: str
) -> None:
    extension = built_extension()
    model = prepared_model(dataclasses.replace(tiny_config, **VARIANTS[variant]), precision)
    src = sources(model.config)
    with torch.inference_mode():
        expected_memory = model.encode(src)
        expected = model.init_decoder_cache(expected_memory, src.eq(model.config.pad_id))
        memory, cache = NativeDecoderStep(model, extension).encode(src)
    assert torch.equal(memory, expected_memory)
    assert cache.cross_attend_mask is not None and expected.cross_attend_mask is not None
    assert torch.equal(cache.cross_attend_mask, expected.cross_attend_mask)
    for layer, expected_layer in zip(cache.layers, expected.layers, strict=True):
        assert torch.equal(layer.cross_key, expected_layer.cross_key)
        assert layer.cross_key.stride() == expected_layer.cross_key.stride()  # the layout the step reads
        assert torch.equal(layer.cross_value, expected_layer.cross_value)
        assert layer.self_key is None and cache.decoded_len == 0


def test_attention_switches_to_the_fused_kernel_past_the_threshold_as_in_python(
    tiny_config: TransformerConfig,
) -> None:
    extension = built_extension()
    model = int8_model(tiny_config)
    model.set_explicit_attention_max_length(3)  # sources of 7 and a cache past 3: both paths within six steps
    src = sources(tiny_config)
    python_outputs = run_steps(TransformerStepModel(model), src, 2)
    native_outputs = run_steps(
        TransformerStepModel(model, native_step=NativeDecoderStep(model, extension)), src, 2
    )
    for python_log_probs, native_log_probs in zip(python_outputs, native_outputs, strict=True):
        assert torch.equal(python_log_probs, native_log_probs)


def test_per_head_widths_other_than_d_model_over_heads_keep_python(tiny_config: TransformerConfig) -> None:
    model = int8_model(dataclasses.replace(tiny_config, d_k=4, d_v=4))  # 4 heads x 4 = 16, not d_model 32
    assert unsupported_reason(model) == "per-head widths other than d_model / num_heads"


def test_a_failed_build_or_check_keeps_the_python_step(
    tiny_config: TransformerConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = int8_model(tiny_config)
    build_native_extension.cache_clear()
    try:

        def fail(*arguments: object, **keywords: object) -> None:
            raise RuntimeError("error: no such header\nsecond line")

        monkeypatch.setattr(native_build.cpp_extension, "load", fail)
        monkeypatch.setattr(native_build.cpp_extension, "is_ninja_available", lambda: True)
        step, note = native_decoder_step(model)
        assert step is None and note == "native decoder step: build failed (second line)"
    finally:
        monkeypatch.undo()
        build_native_extension.cache_clear()  # the failure is not kept for the tests after this one
    built_extension()
    monkeypatch.setattr(native_step_module, "_differs_from_python", lambda step: "decoded differently")
    step, note = native_decoder_step(model)
    assert step is None and note == "native decoder step: not used (its check decoded differently)"


def test_learned_positions_past_the_table_are_refused_naming_the_limit(
    tiny_config: TransformerConfig,
) -> None:
    extension = built_extension()
    model = int8_model(dataclasses.replace(tiny_config, positional_encoding="learned", max_positions=8))
    step = NativeDecoderStep(model, extension)
    with torch.inference_mode():
        state = TransformerStepModel(model).start(sources(model.config))
        assert state.cache is not None
        state.cache.decoded_len = 8
        with pytest.raises(
            ValueError, match=r"position 8 is beyond the learned positions \(max_positions=8\)"
        ):
            step.log_probs(state.cache, torch.full((3,), model.config.bos_id))
