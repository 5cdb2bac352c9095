"""ONNX export and the onnxruntime engine: the same steps, tokens, scores and perplexity as the PyTorch path.

Tolerances, stated once: a decoder step's log-probabilities within :data:`STEP_TOLERANCE` of PyTorch's (onnxruntime
and MKL sum float32 products in other orders), a hypothesis's summed score within :data:`SCORE_TOLERANCE`, and the
tokens of every hypothesis identical.
"""

import shutil
from pathlib import Path

import pytest
import torch

from tests.interop.marian_fixtures import SOURCE_SENTENCES, write_our_checkpoint
from transformer.checkpoint.layout import resolve_checkpoint
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.cli import main
from transformer.config.decode import DecodeConfig
from transformer.data.pipeline.batch import pad_sequences
from transformer.decoding.glossary import Glossary
from transformer.decoding.step_model import TransformerStepModel, inference_context
from transformer.decoding.step_perplexity import step_model_perplexity
from transformer.decoding.translator import Translator
from transformer.evaluation.perplexity import corpus_perplexity
from transformer.model.transformer import Transformer

for package in ("onnx", "onnxscript", "onnxruntime"):
    pytest.importorskip(package)

from transformer.interop.onnx_export import export_onnx  # noqa: E402
from transformer.interop.onnx_step_model import OnnxModel, OnnxStepModel  # noqa: E402
from transformer.interop.onnx_translation import OnnxTranslator  # noqa: E402

STEP_TOLERANCE = 1e-4
SCORE_TOLERANCE = 1e-3


def test_decoder_steps_match_pytorch_through_duplicated_dropped_and_permuted_rows(
    served_run: Path, onnx_export: Path
) -> None:
    model = load_checkpoint(resolve_checkpoint(served_run)).build_model().eval()
    ours, exported = TransformerStepModel(model), OnnxStepModel(OnnxModel.from_directory(onnx_export))
    src_tokens = pad_sequences([[5, 6, 7, 8, 9, 2], [10, 11, 2], [12, 13, 14, 2]], model.config.pad_id)
    # Into beams of 2, a permutation within sentences, sentence 1 dropped, then rows off their sentences' order.
    reorders = [None, [0, 0, 1, 1, 2, 2], [1, 0, 3, 2, 5, 4], [0, 1, 4, 5], [3, 2, 1, 0], [0, 0, 0, 3]]
    with inference_context(ours):
        state, onnx_state = ours.start(src_tokens), exported.start(src_tokens)
        tokens = torch.full((3,), ours.bos_id)
        for rows in reorders:
            if rows is not None:
                indices = torch.tensor(rows)
                ours.reorder(state, indices)
                exported.reorder(onnx_state, indices)
                tokens = tokens[indices]
            expected, found = ours.log_probs(state, tokens), exported.log_probs(onnx_state, tokens)
            assert found.dtype == torch.float32 and found.shape == expected.shape
            assert (found - expected).abs().max() < STEP_TOLERANCE
            tokens = expected.topk(2, dim=-1).indices[:, 1]  # the runner-up: a path neither search would take


@pytest.mark.parametrize(
    "search",
    [
        DecodeConfig(beam_size=1),
        DecodeConfig(beam_size=4),
        DecodeConfig(beam_size=4, nbest=3, length_penalty_form="power", length_penalty=1.0),
        DecodeConfig(beam_size=3, min_length=4, no_repeat_ngram=2, max_length_offset=3),
    ],
    ids=["greedy", "beam4", "beam4-nbest3-power", "beam3-limits"],
)
def test_every_hypothesis_has_our_tokens_and_scores(
    served_run: Path, onnx_export: Path, valid_sentences: list[str], search: DecodeConfig
) -> None:
    sentences = valid_sentences + (served_run / "data" / "test.en").read_text(encoding="utf-8").splitlines()
    ours = Translator.from_checkpoint(served_run, search)
    exported = OnnxTranslator.from_directory(onnx_export)
    exported.decode_config = search
    expected, found = ours.translate_nbest(sentences), exported.translate_nbest(sentences)
    assert len(found) == len(sentences) >= 40
    for want, got in zip(expected, found, strict=True):
        assert [item.tokens for item in got] == [item.tokens for item in want]
        for item, reference in zip(got, want, strict=True):
            assert item.score == pytest.approx(reference.score, abs=SCORE_TOLERANCE)
            assert item.log_prob == pytest.approx(reference.log_prob, abs=SCORE_TOLERANCE)
            assert item.text == reference.text


def test_an_export_searches_as_its_checkpoint_did(served_run: Path, onnx_export: Path) -> None:
    stored = load_checkpoint(resolve_checkpoint(served_run)).decode_config
    assert stored is not None
    assert OnnxTranslator.from_directory(onnx_export).decode_config == stored


def test_perplexity_through_the_step_graph_equals_the_whole_sequence_pass(
    served_run: Path, onnx_export: Path
) -> None:
    sources = (served_run / "data" / "valid.en").read_text(encoding="utf-8").splitlines()
    references = (served_run / "data" / "valid.de").read_text(encoding="utf-8").splitlines()
    pairs = list(zip(sources, references, strict=True))
    ours = Translator.from_checkpoint(served_run)
    expected = corpus_perplexity(ours.model, ours.tokenizer, pairs)
    stepped = step_model_perplexity(TransformerStepModel(ours.model), ours.tokenizer, pairs)  # type: ignore[arg-type]
    found = OnnxTranslator.from_directory(onnx_export).reference_perplexity(pairs)
    for result in (stepped, found):
        assert (result.num_tokens, result.num_pairs) == (expected.num_tokens, expected.num_pairs)
        assert result.nll_per_token == pytest.approx(expected.nll_per_token, abs=1e-5)
    assert expected.num_tokens > 300 and 1.0 < expected.perplexity < 1000


def test_int8_graphs_quantise_the_products_and_stay_close(served_run: Path, onnx_export: Path) -> None:
    import onnx

    int8 = OnnxModel.from_directory(onnx_export, "int8")
    step = onnx.load(str(onnx_export / "decoder_step.int8.onnx"))
    operators = {node.op_type for node in step.graph.node}
    assert {"DynamicQuantizeLinear", "MatMulInteger"} <= operators or "DynamicQuantizeMatMul" in operators
    assert (onnx_export / "decoder_step.int8.onnx").stat().st_size < (
        onnx_export / "decoder_step.onnx"
    ).stat().st_size
    src_tokens = pad_sequences([[5, 6, 7, 8, 9, 2], [10, 11, 2]], 0)
    fp32_step, int8_step = OnnxStepModel(OnnxModel.from_directory(onnx_export)), OnnxStepModel(int8)
    fp32_state, int8_state = fp32_step.start(src_tokens), int8_step.start(src_tokens)
    tokens = torch.full((2,), fp32_step.bos_id)
    differences = []
    for _ in range(5):
        expected = fp32_step.log_probs(fp32_state, tokens)
        found = int8_step.log_probs(int8_state, tokens)
        differences.append((found.exp() - expected.exp()).abs().max())
        tokens = expected.argmax(-1)
    assert 0 < max(differences) < 0.1  # other arithmetic, near the same distribution
    translator = OnnxTranslator.from_directory(onnx_export, "int8")
    assert all(text for text in translator.translate(SOURCE_SENTENCES[:4]))


def test_a_glossary_constrains_the_onnx_search_as_it_does_ours(served_run: Path, onnx_export: Path) -> None:
    glossary = Glossary.from_pairs([("cow", "Kuh"), ("friend", "Freundin")])
    sentences = ["The cooks do not love the cow.", "My friend sees the cow.", "A fox looks for the baker."]
    ours = Translator.from_checkpoint(served_run, DecodeConfig(beam_size=4))
    exported = OnnxTranslator.from_directory(onnx_export)
    exported.decode_config = DecodeConfig(beam_size=4)
    translations = exported.translate(sentences, glossary=glossary)
    assert translations == ours.translate(sentences, glossary=glossary)
    assert "Freundin" in translations[1] and "Kuh" in translations[1]


@pytest.mark.parametrize(
    "overrides",
    [
        {
            "positional_encoding": "learned",
            "max_positions": 64,
            "norm_first": True,
            "activation": "gelu",
            "attention_scoring": "additive",
        },
        {
            "d_k": 4,
            "d_v": 12,
            "attention_scaling": "none",
            "output_bias": True,
            "scale_embeddings": False,
            "share_embeddings": False,
            "tie_output_projection": False,
        },
    ],
    ids=["learned-prenorm-gelu-additive", "narrow-heads-unscaled-untied"],
)
def test_every_attention_variant_exports(overrides: dict[str, object], tmp_path: Path) -> None:
    checkpoint = write_our_checkpoint(tmp_path / "ours", seed=7, **overrides)
    exported = export_onnx(checkpoint, tmp_path / "onnx")
    model = load_checkpoint(checkpoint).build_model().eval()
    onnx_model = OnnxModel.from_directory(exported)
    if overrides.get("positional_encoding") == "learned":
        assert onnx_model.max_positions == 64
    for beam in (1, 4):
        search = DecodeConfig(beam_size=beam, max_length_offset=8)
        ours = Translator(model, load_checkpoint_tokenizer(checkpoint), search)
        theirs = OnnxTranslator(onnx_model, ours.tokenizer, search)
        expected, found = ours.translate_nbest(SOURCE_SENTENCES), theirs.translate_nbest(SOURCE_SENTENCES)
        assert [[item.tokens for item in got] for got in found] == [
            [item.tokens for item in want] for want in expected
        ]


def test_a_windowed_model_is_refused_naming_the_field(tmp_path: Path) -> None:
    checkpoint = write_our_checkpoint(tmp_path / "windowed", seed=1, attention_window=4)
    with pytest.raises(ValueError, match="attention_window=4 cannot be exported to ONNX"):
        export_onnx(checkpoint, tmp_path / "onnx")
    assert not (tmp_path / "onnx").exists()


def test_convert_replaces_only_its_own_export(
    served_run: Path, onnx_export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    user_dir = tmp_path / "mine"
    user_dir.mkdir()
    (user_dir / "notes.txt").write_text("keep me", encoding="utf-8")
    assert main(["convert", "--to", "onnx", str(served_run), str(user_dir)]) == 2
    error = capsys.readouterr().err.strip()
    assert "not an earlier ONNX export" in error and "\n" not in error
    assert (user_dir / "notes.txt").read_text(encoding="utf-8") == "keep me"
    export = tmp_path / "export"
    shutil.copytree(onnx_export, export)  # an earlier export of its own, with int8 graphs
    assert main(["convert", "--to", "onnx", str(served_run), str(export)]) == 0  # replaced, fp32 only now
    assert not (export / "decoder_step.int8.onnx").exists()
    assert (export / "decoder_step.onnx").read_bytes() == (onnx_export / "decoder_step.onnx").read_bytes()
    for bad, message in [
        (["--quantization", "int16"], "--quantization int16: ONNX exports take int8"),
        (["--to", "hf-marian", "--quantization", "int8"], "--quantization int8: a HuggingFace Marian export"),
    ]:
        to = [] if "--to" in bad else ["--to", "onnx"]
        assert main(["convert", *to, *bad, str(served_run), str(tmp_path / "other")]) == 2
        assert message in capsys.readouterr().err


def test_sessions_do_not_spin_unless_asked(onnx_export: Path) -> None:
    key = "session.intra_op.allow_spinning"
    for spin, expected in ((False, "0"), (True, "1")):
        model = OnnxModel.from_directory(onnx_export, threads=2, spin=spin)
        for session in (model.encoder, model.decoder_step):
            options = session.get_session_options()
            assert options.get_session_config_entry(key) == expected and options.intra_op_num_threads == 2


def test_an_imported_marian_model_exports(imported_separate: Path, tmp_path: Path) -> None:
    exported = export_onnx(imported_separate, tmp_path / "onnx")
    checkpoint = load_checkpoint(imported_separate)
    model = checkpoint.build_model().eval()
    assert isinstance(model, Transformer) and model.config.sinusoidal_layout != "interleaved"
    for beam in (1, 4):
        search = DecodeConfig(beam_size=beam, max_length_offset=8)
        ours = Translator(model, load_checkpoint_tokenizer(imported_separate), search)
        theirs = OnnxTranslator(OnnxModel.from_directory(exported), ours.tokenizer, search)
        expected, found = ours.translate_nbest(SOURCE_SENTENCES), theirs.translate_nbest(SOURCE_SENTENCES)
        assert [[item.tokens for item in got] for got in found] == [
            [item.tokens for item in want] for want in expected
        ]
