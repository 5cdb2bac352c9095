"""The server with ``--shortlist``: its continuous batch gives each sentence the offline shortlisted translation."""

import dataclasses
import shutil
from pathlib import Path

import pytest

from transformer.data.shortlist import ShortlistError
from transformer.decoding.checkpoint_shortlist import build_checkpoint_shortlist
from transformer.decoding.translator import Translator


@pytest.fixture(scope="module")
def shortlisted_run(served_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the served run with a small shortlist (5 candidates per piece, 10 frequent pieces)."""
    run = tmp_path_factory.mktemp("shortlisted") / "run"
    shutil.copytree(served_run, run)
    build_checkpoint_shortlist(run, per_source=5, frequent=10)
    return run


@pytest.mark.parametrize("beam", [1, 3])
def test_served_translations_equal_the_offline_shortlisted_ones(
    make_client, shortlisted_run: Path, valid_sentences: list[str], beam: int
) -> None:
    client = make_client(checkpoints={"default": shortlisted_run}, shortlist=True)
    restricted = Translator.from_checkpoint(shortlisted_run, device="cpu", shortlist=True)
    full = Translator.from_checkpoint(shortlisted_run, device="cpu")
    for translator in (restricted, full):
        translator.decode_config = dataclasses.replace(translator.decode_config, beam_size=beam)
    sentences = valid_sentences[:12]
    replies = client.post("/v1/translate", json={"text": sentences, "beam": beam}).json()["translation"]
    assert replies == [restricted.translate([sentence])[0] for sentence in sentences]
    assert replies != full.translate(sentences)  # the shortlist did restrict the server's batch


def test_a_whole_search_in_the_server_uses_the_shortlist_too(
    make_client, shortlisted_run: Path, valid_sentences
) -> None:
    """Sampling runs the offline search between the batch's steps: its samples come from the shortlist."""
    client = make_client(checkpoints={"default": shortlisted_run}, shortlist=True)
    restricted = Translator.from_checkpoint(shortlisted_run, device="cpu", shortlist=True)
    restricted.decode_config = dataclasses.replace(
        restricted.decode_config, sampling=True, seed=11, beam_size=1, temperature=2.0
    )
    sentences = valid_sentences[:6]
    body = {"text": sentences, "sampling": True, "seed": 11, "temperature": 2.0}
    replies = client.post("/v1/translate", json=body).json()["translation"]
    assert replies == [restricted.translate([sentence])[0] for sentence in sentences]
    assert restricted.shortlist is not None
    for sentence, candidates in zip(sentences, restricted.translate_nbest(sentences), strict=True):
        allowed = set(restricted.shortlist.sentence_tokens(restricted._encode(sentence)).tolist())
        assert set(candidates[0].tokens) <= allowed


def test_serving_without_a_shortlist_file_is_refused_naming_it(served_run: Path, tmp_path: Path) -> None:
    from transformer.serving.config import ServeConfig
    from transformer.serving.server import build_server_state

    run = tmp_path / "run"
    shutil.copytree(served_run, run)
    with pytest.raises(ShortlistError, match=r"shortlist.safetensors: no such shortlist file"):
        build_server_state(ServeConfig(checkpoints={"default": (run,)}, shortlist=True))
