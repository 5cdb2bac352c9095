"""A converted HuggingFace Marian model served with continuous batching (decoder start = pad, logits bias)."""

import dataclasses
from pathlib import Path

import pytest

from transformer.decoding.translator import Translator

SENTENCES = [
    "The dog runs.",
    "A man with a hat sits on the bench and reads a newspaper.",
    "Two children play.",
    "The woman who sells flowers at the market smiles at the old man.",
    "Hello.",
]


@pytest.fixture(scope="module")
def imported_marian(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from tests.interop.marian_fixtures import MarianSpec, write_random_marian
    from transformer.interop.marian import import_marian

    directory = write_random_marian(tmp_path_factory.mktemp("marian") / "hf", MarianSpec(), seed=1)
    return import_marian(directory, tmp_path_factory.mktemp("imported") / "marian")


@pytest.mark.parametrize("beam", [1, 3])
def test_a_converted_marian_model_translates_as_offline(
    make_client, imported_marian: Path, beam: int
) -> None:
    client = make_client(checkpoints={"marian": imported_marian})
    translator = Translator.from_checkpoint(imported_marian, device="cpu")
    translator.decode_config = dataclasses.replace(translator.decode_config, beam_size=beam)
    reply = client.post("/v1/translate", json={"text": SENTENCES, "beam": beam})
    assert reply.status_code == 200, reply.text
    assert reply.json()["translation"] == [translator.translate([sentence])[0] for sentence in SENTENCES]
    assert any(reply.json()["translation"])  # not all empty: the comparison means something
