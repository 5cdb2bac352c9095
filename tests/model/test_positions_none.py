"""``positional_encoding: "none"``: no position information at all, a permutation-equivariant encoder.

Without positions each encoder row depends only on its own token and on the *set* of tokens around it, so
permuting the source tokens permutes the encoder output rows the same way; the decoder's cross-attention
sums over source positions, so it cannot see the order either. The default encodings are untouched: a model
without positions is the sinusoidal model minus the sinusoid table, exactly.
"""

import dataclasses
from pathlib import Path

import pytest
import torch

from transformer import Transformer, TransformerConfig
from transformer.checkpoint.model_checkpoint import load_checkpoint, save_checkpoint
from transformer.cli import main
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.decoding.translator import Translator
from transformer.model.masks import build_padding_mask
from transformer.model.positional_encoding import sinusoidal_table


@pytest.fixture
def none_config(tiny_config: TransformerConfig) -> TransformerConfig:
    return dataclasses.replace(tiny_config, positional_encoding="none")


def test_no_positional_module_and_no_parameters(none_config: TransformerConfig) -> None:
    model = Transformer(none_config)
    assert model.positional_encoding is None
    assert not any("positional" in name for name in model.state_dict())
    learned = Transformer(dataclasses.replace(none_config, positional_encoding="learned", max_positions=16))
    assert learned.num_parameters() - model.num_parameters() == 16 * none_config.d_model


def test_embed_adds_nothing_and_sinusoidal_adds_exactly_the_table(none_config: TransformerConfig) -> None:
    sinusoidal = Transformer(dataclasses.replace(none_config, positional_encoding="sinusoidal")).eval()
    model = Transformer(none_config).eval()
    model.load_state_dict(sinusoidal.state_dict())  # the sinusoid table is not saved: same keys
    tokens = torch.randint(4, none_config.vocab_size, (2, 9))
    plain = model.embed(tokens, model.src_embedding, offset=3)
    assert torch.equal(plain, model.src_embedding(tokens))
    table = sinusoidal_table(12, none_config.d_model)[3:12]
    assert torch.equal(sinusoidal.embed(tokens, sinusoidal.src_embedding, offset=3), plain + table)


def test_encoder_is_permutation_equivariant_with_padding(none_config: TransformerConfig) -> None:
    torch.manual_seed(0)
    model = Transformer(none_config).eval()
    lengths = [7, 4, 6]
    src = torch.full((3, 9), none_config.pad_id)
    for row, length in enumerate(lengths):
        src[row, :length] = torch.randint(4, none_config.vocab_size, (length,))
    memory = model.encode(src)
    permuted = src.clone()
    permutations = [torch.randperm(length) for length in lengths]
    for row, (length, permutation) in enumerate(zip(lengths, permutations, strict=True)):
        permuted[row, :length] = src[row, permutation]  # padding stays at the end
    permuted_memory = model.encode(permuted)
    for row, (length, permutation) in enumerate(zip(lengths, permutations, strict=True)):
        torch.testing.assert_close(
            permuted_memory[row, :length], memory[row, permutation], atol=1e-5, rtol=1e-5
        )
        # Padding respected: the real rows equal those of the sentence encoded alone, without padding.
        alone = model.encode(src[row : row + 1, :length])
        torch.testing.assert_close(alone[0], memory[row, :length], atol=1e-5, rtol=1e-5)


def test_permuted_source_gives_the_same_output_distribution(none_config: TransformerConfig) -> None:
    torch.manual_seed(1)
    model = Transformer(none_config).eval()
    src = torch.randint(4, none_config.vocab_size, (2, 8))
    tgt = torch.randint(4, none_config.vocab_size, (2, 5))
    tgt[:, 0] = none_config.bos_id
    permutation = torch.randperm(8)
    torch.testing.assert_close(model(src[:, permutation], tgt), model(src, tgt), atol=1e-5, rtol=1e-5)
    # With positions, the same permutation changes the decoder's view of the source.
    sinusoidal = Transformer(dataclasses.replace(none_config, positional_encoding="sinusoidal")).eval()
    assert not torch.allclose(sinusoidal(src[:, permutation], tgt), sinusoidal(src, tgt), atol=1e-3)


def test_incremental_decoding_equals_the_full_forward(none_config: TransformerConfig) -> None:
    torch.manual_seed(2)
    model = Transformer(none_config).eval()
    src = torch.randint(4, none_config.vocab_size, (2, 7))
    src[0, 5:] = none_config.pad_id
    tgt = torch.randint(4, none_config.vocab_size, (2, 6))
    tgt[:, 0] = none_config.bos_id
    full = model(src, tgt)
    cache = model.init_decoder_cache(model.encode(src), build_padding_mask(src, none_config.pad_id))
    steps = [model.decode(tgt[:, i : i + 1], None, None, cache) for i in range(tgt.size(1))]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    hypotheses = search(model, src, DecodeConfig(beam_size=3, max_length_offset=4))
    assert all(items and len(items[0].tokens) <= 11 for items in hypotheses)


def test_trains_saves_and_translates(tmp_path: Path, write_config) -> None:
    config = write_config(tmp_path, model={"positional_encoding": "none"}, train={"max_steps": 8})
    run_dir = tmp_path / "run"
    assert main(["train", "--config", str(config), "--output-dir", str(run_dir)]) == 0
    checkpoint = load_checkpoint(run_dir)
    assert checkpoint.model_config.positional_encoding == "none"
    translator = Translator.from_checkpoint(run_dir, device="cpu")
    outputs = translator.translate(["The man sees the dog.", "The dog sees the man.", ""])
    assert len(outputs) == 3 and outputs[2] == ""
    # The model cannot tell the two orders apart: the same words give the same translation.
    assert outputs[0] == outputs[1]
    assert translator.max_input_tokens == 1024  # no position table to fit
    int8 = Translator.from_checkpoint(run_dir, device="cpu", precision="int8")
    assert len(int8.translate(["The man sees the dog."])) == 1


def test_marian_export_refuses_in_one_line(none_config: TransformerConfig, tmp_path: Path) -> None:
    from tests.interop.marian_fixtures import write_our_checkpoint
    from transformer.interop.marian import export_marian

    checkpoint_dir = write_our_checkpoint(tmp_path / "model", positional_encoding="none")
    with pytest.raises(
        ValueError, match=r"positional_encoding='none' cannot be exported to MarianMT"
    ) as error:
        export_marian(checkpoint_dir, tmp_path / "marian")
    assert "\n" not in str(error.value)
    assert not (tmp_path / "marian").exists()


def test_ctranslate2_export_holds_no_positions_as_a_zero_table(tmp_path: Path) -> None:
    pytest.importorskip("ctranslate2")
    from tests.interop.marian_fixtures import ENGLISH, SOURCE_SENTENCES, pad_batch, write_our_checkpoint
    from transformer.interop.ctranslate2 import CTranslate2Translator, export_ctranslate2

    checkpoint_dir = write_our_checkpoint(tmp_path / "model", seed=8, positional_encoding="none")
    translator = CTranslate2Translator.from_directory(
        export_ctranslate2(checkpoint_dir, tmp_path / "ct2"), threads=1
    )
    model = load_checkpoint(checkpoint_dir).build_model().eval()
    src_ids = [translator.encode(text) for text in SOURCE_SENTENCES + ENGLISH[:20]]
    config = DecodeConfig(beam_size=1, length_penalty=0.0, length_penalty_form="power", max_length_offset=5)
    expected = [items[0].tokens for items in search(model, pad_batch(src_ids, model.config.pad_id), config)]
    assert translator.translate_ids(src_ids, beam_size=1, max_length_offset=5) == expected


def test_checkpoint_round_trip(none_config: TransformerConfig, tmp_path: Path) -> None:
    model = Transformer(none_config).eval()
    path = save_checkpoint(tmp_path / "ckpt", model, none_config, {})
    loaded = load_checkpoint(path).build_model().eval()
    src = torch.randint(4, none_config.vocab_size, (1, 5))
    assert torch.equal(loaded.encode(src), model.encode(src))
