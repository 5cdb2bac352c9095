"""Our greedy and beam search against ``transformers``' ``generate()``, in both directions of conversion.

``generate()`` divides beam scores by ``|Y|^alpha`` where ``|Y|`` counts the generated tokens including EOS
(its ``cur_len + 1 - decoder_prompt_len``): our "power" length penalty. With ``early_stopping=True`` a
sentence stops once ``num_beams`` hypotheses have finished, as ours does. ``bad_words_ids`` forbids PAD
(and BOS), which our search never outputs, and ``forced_eos_token_id=None`` lets a hypothesis stop at the
length limit without EOS, as ours does.
"""

from pathlib import Path
from typing import Any

import pytest
import torch

from tests.interop.marian_fixtures import ENGLISH, SOURCE_SENTENCES, pad_batch, strip_generated
from transformer.checkpoint.model_checkpoint import load_checkpoint, load_checkpoint_tokenizer
from transformer.config.decode import DecodeConfig
from transformer.decoding.beam_search import search
from transformer.model.transformer import Transformer

MAX_NEW_TOKENS = 20
SEARCHES = [(1, 1.0), (4, 1.0), (4, 0.6), (5, 0.0), (3, 2.0)]


def source_batch(checkpoint_dir: Path, model: Transformer) -> torch.Tensor:
    tokenizer = load_checkpoint_tokenizer(checkpoint_dir)
    rows = [tokenizer.encode(text) + [model.config.eos_id] for text in SOURCE_SENTENCES + ENGLISH[:16]]
    return pad_batch(rows, model.config.pad_id)


def our_outputs(model: Transformer, src: torch.Tensor, beam_size: int, alpha: float) -> list[list[int]]:
    config = DecodeConfig(
        beam_size=beam_size,
        length_penalty=alpha,
        length_penalty_form="power",
        max_length=MAX_NEW_TOKENS,
        max_length_offset=1000,  # so the absolute limit, like max_new_tokens, decides
    )
    return [hypotheses[0].tokens for hypotheses in search(model, src, config)]


def generated_outputs(
    hf_model: Any, src: torch.Tensor, beam_size: int, alpha: float, model: Transformer
) -> list[list[int]]:
    config = model.config
    forbidden = [[config.pad_id]] + (
        [[config.bos_id]] if config.bos_id not in (config.eos_id, config.pad_id) else []
    )
    with torch.no_grad():
        output = hf_model.generate(
            input_ids=src,
            attention_mask=src.ne(config.pad_id),
            num_beams=beam_size,
            do_sample=False,
            length_penalty=alpha,
            early_stopping=True,
            max_new_tokens=MAX_NEW_TOKENS,
            bad_words_ids=forbidden,
            forced_eos_token_id=None,
            num_return_sequences=1,
        )
    return [strip_generated(row, config.start_id, config.eos_id, config.pad_id) for row in output.tolist()]


@pytest.mark.parametrize(("beam_size", "alpha"), SEARCHES)
@pytest.mark.parametrize(
    ("checkpoint_name", "hf_dir_name"),
    [
        ("imported_shared", "shared_marian_dir"),
        ("imported_separate", "separate_marian_dir"),
        ("variant_checkpoint", "exported_variant"),
        ("paper_checkpoint", "exported_paper"),
    ],
)
def test_search_matches_generate(
    checkpoint_name: str, hf_dir_name: str, beam_size: int, alpha: float, request: pytest.FixtureRequest
) -> None:
    transformers = pytest.importorskip("transformers")
    checkpoint_dir, hf_dir = request.getfixturevalue(checkpoint_name), request.getfixturevalue(hf_dir_name)
    model = load_checkpoint(checkpoint_dir).build_model()
    hf_model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    src = source_batch(checkpoint_dir, model)
    ours = our_outputs(model, src, beam_size, alpha)
    assert ours == generated_outputs(hf_model, src, beam_size, alpha, model)


@pytest.mark.parametrize("checkpoint_name", ["imported_shared", "imported_separate", "variant_checkpoint"])
def test_parity_cases_include_early_eos(checkpoint_name: str, request: pytest.FixtureRequest) -> None:
    """The random models are calibrated so that some outputs end before the limit: EOS handling is tested."""
    checkpoint_dir = request.getfixturevalue(checkpoint_name)
    model = load_checkpoint(checkpoint_dir).build_model()
    lengths = [len(tokens) for tokens in our_outputs(model, source_batch(checkpoint_dir, model), 4, 1.0)]
    assert min(lengths) < MAX_NEW_TOKENS


@pytest.mark.parametrize(("beam_size", "alpha"), [(1, 1.0), (4, 1.0), (4, 0.6)])
@pytest.mark.parametrize(
    ("checkpoint_name", "hf_dir_name"),
    [("variant_checkpoint", "exported_variant"), ("paper_checkpoint", "exported_paper")],
)
def test_an_exported_models_own_generation_config_searches_like_ours(
    checkpoint_name: str, hf_dir_name: str, beam_size: int, alpha: float, request: pytest.FixtureRequest
) -> None:
    """Only the search size, penalty and length limit are passed: the rest comes from generation_config.json.

    Issue #28 item 7: the export used to set ``forced_eos_token_id``, so ``generate()`` replaced the last token
    of every output stopped by the length limit with EOS, where our search keeps the output as it is.
    """
    transformers = pytest.importorskip("transformers")
    checkpoint_dir, hf_dir = request.getfixturevalue(checkpoint_name), request.getfixturevalue(hf_dir_name)
    model = load_checkpoint(checkpoint_dir).build_model()
    hf_model = transformers.MarianMTModel.from_pretrained(hf_dir).eval()
    src = source_batch(checkpoint_dir, model)
    ours = our_outputs(model, src, beam_size, alpha)
    assert max(len(tokens) for tokens in ours) == MAX_NEW_TOKENS  # some outputs are stopped by the limit
    with torch.no_grad():
        output = hf_model.generate(
            input_ids=src,
            attention_mask=src.ne(model.config.pad_id),
            num_beams=beam_size,
            length_penalty=alpha,
            max_new_tokens=MAX_NEW_TOKENS,
        )
    config = model.config
    generated = [
        strip_generated(row, config.start_id, config.eos_id, config.pad_id) for row in output.tolist()
    ]
    assert ours == generated
