import json
import random
from pathlib import Path

import pytest

from tests.interop.marian_fixtures import ENGLISH, GERMAN, SOURCE_SENTENCES, marian_vocabulary, train_spm
from transformer.data.pipeline.marian_tokenizer import MarianTokenizer
from transformer.data.pipeline.text_tokenizer import TextTokenizer

pytestmark = pytest.mark.filterwarnings("ignore:Recommended. pip install sacremoses")

TRICKY_TEXTS = [
    "a </s> b",
    "<unk>x <pad>",
    "x<pad>y",
    "The</s>",
    ">>deu<< The man sees the dog.",
    ">>xx<<",
    "  leading and  double  spaces ",
    "",
]


@pytest.fixture(scope="module")
def handmade_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Marian tokenizer files written without transformers."""
    directory = tmp_path_factory.mktemp("handmade")
    spm_bytes = train_spm(ENGLISH + GERMAN, 90)
    (directory / "source.spm").write_bytes(spm_bytes)
    (directory / "target.spm").write_bytes(spm_bytes)
    (directory / "vocab.json").write_text(json.dumps(marian_vocabulary(spm_bytes)), encoding="utf-8")
    return directory


def test_satisfies_the_text_tokenizer_protocol(handmade_dir: Path) -> None:
    tokenizer = MarianTokenizer.load(handmade_dir)
    assert isinstance(tokenizer, TextTokenizer)
    assert tokenizer.vocab_size == tokenizer.source_vocab_size == 90
    assert (tokenizer.eos_id, tokenizer.unk_id, tokenizer.pad_id) == (0, 1, 89)
    assert tokenizer.id_to_piece(0) == "</s>"
    ids = tokenizer.encode("The man sees the dog.")
    assert ids and tokenizer.eos_id not in ids
    assert tokenizer.decode([*ids, tokenizer.eos_id, tokenizer.pad_id]) == "The man sees the dog."


def test_fingerprint_covers_every_file(handmade_dir: Path, tmp_path: Path) -> None:
    tokenizer = MarianTokenizer.load(handmade_dir)
    assert MarianTokenizer(tokenizer.files()).fingerprint == tokenizer.fingerprint
    changed = tokenizer.files()
    changed["tokenizer_config.json"] = b'{"model_max_length": 10}'
    assert MarianTokenizer(changed).fingerprint != tokenizer.fingerprint


def test_missing_file_is_named(handmade_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "source.spm").write_bytes((handmade_dir / "source.spm").read_bytes())
    with pytest.raises(
        ValueError, match=r"missing Marian tokenizer file\(s\) \['target.spm', 'vocab.json'\]"
    ):
        MarianTokenizer.load(tmp_path)


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        ('{"a": 0, "b": 0}', "ids must be 0 .. 1"),
        ('{"a": 0, "b": 5}', "ids must be 0 .. 1"),
        ('["a", "b"]', "expected a JSON object"),
        ("{not json", "not valid JSON"),
        ('{"</s>": 0, "a": 1}', "unk_token '<unk>' is not in the vocabulary"),
    ],
)
def test_malformed_vocabulary_is_refused(handmade_dir: Path, contents: str, message: str) -> None:
    files = MarianTokenizer.load(handmade_dir).files()
    files["vocab.json"] = contents.encode()
    with pytest.raises(ValueError, match=message) as error:
        MarianTokenizer(files, origin="somewhere")
    assert "somewhere" in str(error.value)


def test_decode_rejects_ids_outside_the_vocabulary(handmade_dir: Path) -> None:
    with pytest.raises(ValueError, match=r"token id 90 is outside the vocabulary \[0, 90\)"):
        MarianTokenizer.load(handmade_dir).decode([5, 90])


@pytest.mark.parametrize("fixture_name", ["shared_marian_dir", "separate_marian_dir"])
def test_ids_match_transformers(fixture_name: str, request: pytest.FixtureRequest) -> None:
    transformers = pytest.importorskip("transformers")
    directory = request.getfixturevalue(fixture_name)
    theirs = transformers.MarianTokenizer.from_pretrained(directory)
    ours = MarianTokenizer.load(directory)
    for text in SOURCE_SENTENCES + ENGLISH[:40] + TRICKY_TEXTS:
        assert ours.encode(text) + [ours.eos_id] == theirs(text)["input_ids"], text
    for text in GERMAN[:40] + TRICKY_TEXTS:
        assert ours.encode_target(text) + [ours.eos_id] == theirs(text_target=text)["input_ids"], text
    assert ours.encode(SOURCE_SENTENCES[-1]).count(ours.unk_id) > 0  # the unknown characters were exercised
    rng = random.Random(0)
    samples = [[rng.randrange(ours.vocab_size) for _ in range(rng.randrange(12))] for _ in range(100)]
    samples += [theirs(text_target=text)["input_ids"] for text in GERMAN[:40]]
    for ids in samples:
        assert ours.decode(ids) == theirs.decode(ids, skip_special_tokens=True), ids
