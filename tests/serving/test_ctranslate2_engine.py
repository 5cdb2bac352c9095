"""``--engine ctranslate2``: a CTranslate2 export served with request batching, as the translate command gives."""

import math
from pathlib import Path

import pytest

from transformer.config.decode import DecodeConfig
from transformer.serving.config import ServeConfig


@pytest.fixture(scope="module")
def exported(served_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("ctranslate2")
    from transformer.interop.ctranslate2 import export_ctranslate2

    return export_ctranslate2(served_run, tmp_path_factory.mktemp("ct2") / "model")


def test_translations_and_scores_match_the_ctranslate2_engine_of_translate(
    make_client, exported: Path, served_run: Path, valid_sentences: list[str]
) -> None:
    from transformer.interop.ctranslate2 import CTranslate2Translator

    client = make_client(checkpoints={"ct2": exported}, engine="ctranslate2", batching="request")
    sentences = valid_sentences[:8]
    reference = CTranslate2Translator.from_directory(exported, "cpu", "float32")
    for beam in (1, 3):
        reply = client.post("/v1/translate", json={"text": sentences, "beam": beam, "alpha": 0.6})
        assert reply.status_code == 200, reply.text
        assert reply.json()["translation"] == reference.translate(
            sentences, beam_size=beam, length_penalty=0.6
        )
    # Greedy with alpha 0, one sentence per request (so CTranslate2 decodes it alone, as below): score and
    # log_prob are CTranslate2's own summed log-probability. (CTranslate2 renormalises after suppressing PAD
    # and BOS, so it sits a little above ours for the same tokens: not compared.)
    max_length_offset = DecodeConfig().max_length_offset  # an export keeps no run settings: the paper's
    for sentence in sentences:
        reply = client.post("/v1/translate", json={"text": [sentence], "beam": 1, "alpha": 0.0}).json()
        ids = reference.encode(sentence)
        raw = reference.translator.translate_batch(
            [[reference.source_pieces[token] for token in ids]], beam_size=1, length_penalty=0.0, min_decoding_length=0,
            max_decoding_length=len(ids) + max_length_offset, return_end_token=True, return_scores=True,
            suppress_sequences=reference.suppressed, max_input_length=0,
        )[0]  # fmt: skip
        details = reply["sentences"][0][0]
        assert details["translation"] == reference.translate([sentence], beam_size=1, length_penalty=0.0)[0]
        assert details["log_prob"] == details["score"] == pytest.approx(raw.scores[0], abs=1e-4)
        # |Y| counts the end token CTranslate2 returned (return_end_token) as our searches count EOS.
        steps = len(raw.hypotheses[0])
        assert details["confidence"] == pytest.approx(math.exp(raw.scores[0] / steps), abs=1e-5)
    nbest = client.post("/v1/translate", json={"text": sentences[0], "beam": 4, "nbest": 3}).json()
    scores = [item["score"] for item in nbest["sentences"][0][0]["nbest"]]
    assert len(scores) == 3 and scores == sorted(scores, reverse=True)


def test_continuous_batching_is_refused_with_ctranslate2(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use --batching request"):
        ServeConfig(checkpoints={"a": tmp_path}, engine="ctranslate2", batching="continuous")
