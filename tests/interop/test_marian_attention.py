"""``transformer attention`` on an imported HuggingFace Marian model: separate vocabularies, decoder start = pad.

The decoder input must start with the model's ``start_id`` (Marian's pad id, not a BOS it does not have) and
the target must be encoded with the target vocabulary; the source axis is labelled with source pieces. The
maps are checked against the attention ``transformers`` itself returns for the same decoder input.
"""

from pathlib import Path

import pytest
import torch

from tests.interop.marian_fixtures import GERMAN, SOURCE_SENTENCES
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.cli import main
from transformer.visualization.attention_inputs import sentence_attention


def test_attention_maps_equal_transformers_own(imported_separate: Path, separate_marian_dir: Path) -> None:
    transformers = pytest.importorskip("transformers")
    model = load_checkpoint(imported_separate).build_model()
    tokenizer = load_checkpoint_tokenizer(imported_separate)
    source, target = SOURCE_SENTENCES[0], GERMAN[0]
    maps = sentence_attention(model, tokenizer, source, target)

    source_ids = [*tokenizer.encode(source), model.config.eos_id]
    target_ids = [model.config.pad_id, *tokenizer.encode_target(target)]
    assert model.config.start_id == model.config.pad_id != model.config.bos_id  # BOS would be wrong here
    assert maps.target_tokens == ["<pad>", *(tokenizer.id_to_piece(token) for token in target_ids[1:])]
    assert maps.source_tokens[-1] == "</s>"
    assert maps.source_tokens[:-1] == [tokenizer.source_id_to_piece(token) for token in source_ids[:-1]]
    # The vocabularies differ (100 source pieces, 80 target ones): target pieces would mislabel the source.
    assert tokenizer.source_pieces() != tokenizer.target_pieces()

    hf_model = transformers.MarianMTModel.from_pretrained(
        separate_marian_dir, attn_implementation="eager"
    ).eval()
    with torch.no_grad():
        theirs = hf_model(
            input_ids=torch.tensor([source_ids]),
            decoder_input_ids=torch.tensor([target_ids]),
            output_attentions=True,
        )
    for ours, hf in (
        (maps.attention.encoder_self, theirs.encoder_attentions),
        (maps.attention.decoder_self, theirs.decoder_attentions),
        (maps.attention.cross, theirs.cross_attentions),
    ):
        assert len(ours) == len(hf)
        for layer_ours, layer_hf in zip(ours, hf, strict=True):
            torch.testing.assert_close(layer_ours, layer_hf, atol=1e-5, rtol=1e-4)


def test_attention_command_on_an_imported_model(imported_separate: Path, tmp_path: Path, capsys) -> None:
    pytest.importorskip("matplotlib")
    output = tmp_path / "maps"
    code = main(
        [
            "attention",
            "--checkpoint",
            str(imported_separate),
            "--text",
            SOURCE_SENTENCES[0],
            "--output-dir",
            str(output),
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert printed.startswith("translation: ")
    page = (output / "attention.html").read_text(encoding="utf-8")
    assert '"query_tokens":["\\u003cpad\\u003e",' in page  # the decoder's first row: Marian's start token
    assert sorted(path.suffix for path in output.iterdir()).count(".png") >= 1
