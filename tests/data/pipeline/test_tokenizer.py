"""The joint BPE tokenizer: round trips, fixed special ids, determinism, atomic writes, errors."""

import hashlib
import inspect
import itertools
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import sentencepiece

from transformer.data.pipeline.special_tokens import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from transformer.data.pipeline.tokenizer import Tokenizer

ENGLISH_SUBJECTS = ["A man", "A woman", "Two children", "The dog", "A little girl", "An old man"]
ENGLISH_VERBS = ["is running through", "is sitting on", "walks across", "plays in", "looks at"]
ENGLISH_OBJECTS = ["the street.", "a green field.", "the snowy mountain.", "a wooden bridge.", "the market."]
GERMAN_SUBJECTS = [
    "Ein Mann",
    "Eine Frau",
    "Zwei Kinder",
    "Der Hund",
    "Ein kleines Mädchen",
    "Ein alter Mann",
]
GERMAN_VERBS = ["läuft durch", "sitzt auf", "geht über", "spielt in", "schaut auf"]
GERMAN_OBJECTS = ["die Straße.", "eine grüne Wiese.", "den verschneiten Berg.", "eine Brücke.", "den Markt."]
VOCAB_SIZE = 300


def bilingual_sentences() -> list[str]:
    english = itertools.product(ENGLISH_SUBJECTS, ENGLISH_VERBS, ENGLISH_OBJECTS)
    german = itertools.product(GERMAN_SUBJECTS, GERMAN_VERBS, GERMAN_OBJECTS)
    pairs = zip(english, german, strict=True)
    return [" ".join(sentence) for pair in pairs for sentence in pair]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    return Tokenizer.train(bilingual_sentences(), tmp_path_factory.mktemp("bpe") / "joint.model", VOCAB_SIZE)


def test_round_trip_restores_text_including_umlauts(tokenizer: Tokenizer) -> None:
    sentences = [
        "Ein kleines Mädchen läuft über die Straße.",
        "A little girl walks across the snowy mountain.",
        "Zwei Kinder schaut auf den Markt.",  # an unseen combination of seen words
        "Der Mann spielt.",
    ]
    for sentence in sentences:
        ids = tokenizer.encode(sentence)
        assert UNK_ID not in ids
        assert tokenizer.decode(ids) == sentence


def test_special_ids_are_fixed(tokenizer: Tokenizer) -> None:
    assert tokenizer.vocab_size == VOCAB_SIZE
    pieces = [tokenizer.id_to_piece(token_id) for token_id in (PAD_ID, BOS_ID, EOS_ID, UNK_ID)]
    assert pieces == ["<pad>", "<s>", "</s>", "<unk>"]
    assert (PAD_ID, BOS_ID, EOS_ID, UNK_ID) == (0, 1, 2, 3)
    ids = tokenizer.encode("Der Hund sitzt auf der Brücke.")
    assert not {PAD_ID, BOS_ID, EOS_ID} & set(ids)


def test_decode_drops_padding_bos_and_eos(tokenizer: Tokenizer) -> None:
    text = "Eine Frau geht über die Straße."
    ids = tokenizer.encode(text)
    assert tokenizer.decode([BOS_ID, *ids, EOS_ID, PAD_ID, PAD_ID]) == text


def test_decode_rejects_ids_outside_the_vocabulary(tokenizer: Tokenizer) -> None:
    with pytest.raises(ValueError, match=f"token id {VOCAB_SIZE} is outside the vocabulary"):
        tokenizer.decode([5, VOCAB_SIZE])
    with pytest.raises(ValueError, match="token id -1"):
        tokenizer.id_to_piece(-1)


def test_encode_batch_and_pieces_agree_with_encode(tokenizer: Tokenizer) -> None:
    texts = ["A man looks at the street.", "", "Ein alter Mann sitzt auf eine Brücke."]
    assert tokenizer.encode_batch(texts) == [tokenizer.encode(text) for text in texts]
    assert tokenizer.encode_batch([]) == []
    assert tokenizer.encode("   ") == []
    text = texts[2]
    assert tokenizer.pieces(text) == [tokenizer.id_to_piece(i) for i in tokenizer.encode(text)]


def test_vocabulary_is_joint(tokenizer: Tokenizer) -> None:
    # One model serves both languages: frequent words of either become one or two pieces.
    for word in ("Mädchen", "Straße", "verschneiten", "girl", "mountain", "wooden"):
        assert 1 <= len(tokenizer.pieces(word)) <= 2, (word, tokenizer.pieces(word))


def test_training_is_deterministic_and_fingerprint_hashes_the_file(tmp_path: Path) -> None:
    first = Tokenizer.train(bilingual_sentences(), tmp_path / "a" / "first.model", VOCAB_SIZE)
    second = Tokenizer.train(bilingual_sentences(), tmp_path / "b" / "second.model", VOCAB_SIZE)
    first_bytes = (tmp_path / "a" / "first.model").read_bytes()
    assert first_bytes == (tmp_path / "b" / "second.model").read_bytes()
    assert first.fingerprint == second.fingerprint == hashlib.sha256(first_bytes).hexdigest()
    other = Tokenizer.train(bilingual_sentences()[:-40], tmp_path / "other.model", VOCAB_SIZE)
    assert other.fingerprint != first.fingerprint


# Loads tokenizer.py on its own: importing the `transformer` package would pull in torch (seconds).
TRAIN_IN_SUBPROCESS = """
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("tokenizer", sys.argv[1])
tokenizer = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tokenizer)
sentences = sys.stdin.read().splitlines()
print(tokenizer.Tokenizer.train(sentences, Path(sys.argv[2]), 120, seed_sentences=150).fingerprint)
"""


def test_training_on_a_sample_is_identical_across_processes(tmp_path: Path) -> None:
    # With more sentences than seed_sentences the corpus is sampled; SentencePiece's own sampler is
    # seeded per process, so this checks the sample (and the model) is the same in a fresh process.
    corpus = "\n".join(bilingual_sentences())
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                TRAIN_IN_SUBPROCESS,
                inspect.getfile(Tokenizer),
                str(tmp_path / f"{run}.model"),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for run in range(2)
    ]
    fingerprints = [process.communicate(corpus, timeout=120)[0].strip() for process in processes]
    assert all(process.returncode == 0 for process in processes)
    in_process = Tokenizer.train(bilingual_sentences(), tmp_path / "here.model", 120, seed_sentences=150)
    assert fingerprints == [in_process.fingerprint] * 2


def test_training_leaves_only_the_model_file(tmp_path: Path) -> None:
    Tokenizer.train(bilingual_sentences(), tmp_path / "joint.model", VOCAB_SIZE)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["joint.model"]


def test_failed_training_keeps_the_existing_model(tmp_path: Path) -> None:
    model_path = tmp_path / "joint.model"
    Tokenizer.train(bilingual_sentences(), model_path, VOCAB_SIZE)
    original = model_path.read_bytes()
    with pytest.raises(ValueError, match="no non-empty sentences"):
        Tokenizer.train(["", "   ", "\n"], model_path, VOCAB_SIZE)
    with pytest.raises(
        ValueError, match=r"vocab_size=100000 is too large for these 300 training sentences; .* at most \d+"
    ):
        Tokenizer.train(bilingual_sentences(), model_path, 100_000)
    assert model_path.read_bytes() == original
    assert sorted(path.name for path in tmp_path.iterdir()) == ["joint.model"]


def test_training_rejects_bad_options(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="vocab_size=4 must exceed 4"):
        Tokenizer.train(bilingual_sentences(), tmp_path / "m.model", 4)
    with pytest.raises(ValueError, match="seed_sentences=0 must be positive"):
        Tokenizer.train(bilingual_sentences(), tmp_path / "m.model", 100, seed_sentences=0)
    with pytest.raises(ValueError, match=r"character_coverage=0\.0"):
        Tokenizer.train(bilingual_sentences(), tmp_path / "m.model", 100, character_coverage=0.0)
    assert not list(tmp_path.iterdir())


def test_training_is_quiet(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    Tokenizer.train(bilingual_sentences(), tmp_path / "joint.model", VOCAB_SIZE)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


def test_load_returns_the_same_model(tokenizer: Tokenizer) -> None:
    assert tokenizer.model_path is not None
    loaded = Tokenizer.load(tokenizer.model_path)
    assert loaded.fingerprint == tokenizer.fingerprint
    assert loaded.model_path == tokenizer.model_path
    assert loaded.serialized() == tokenizer.model_path.read_bytes()


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "missing.model"
    with pytest.raises(FileNotFoundError, match=r"missing\.model does not exist"):
        Tokenizer.load(missing)
    garbage = tmp_path / "garbage.model"
    garbage.write_bytes(b"this is not a model")
    with pytest.raises(ValueError, match=r"garbage\.model: not a SentencePiece model"):
        Tokenizer.load(garbage)


def test_load_rejects_models_with_other_special_ids(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign"
    # SentencePiece's defaults: unk 0, bos 1, eos 2 and no padding piece.
    sentencepiece.SentencePieceTrainer.Train(
        sentence_iterator=iter(bilingual_sentences()),
        model_prefix=str(foreign),
        vocab_size=100,
        model_type="bpe",
        minloglevel=2,
    )
    with pytest.raises(ValueError, match=r"foreign\.model: pad_id is -1, expected 0"):
        Tokenizer.load(tmp_path / "foreign.model")


def test_serialized_round_trip_and_pickle(tokenizer: Tokenizer) -> None:
    restored = Tokenizer.from_serialized(tokenizer.serialized())
    assert restored.fingerprint == tokenizer.fingerprint
    assert restored.model_path is None
    text = "Ein alter Mann läuft durch den Markt."
    assert restored.encode(text) == tokenizer.encode(text)
    unpickled = pickle.loads(pickle.dumps(tokenizer))
    assert unpickled.fingerprint == tokenizer.fingerprint
    assert unpickled.encode(text) == tokenizer.encode(text)
    with pytest.raises(ValueError, match="serialized model: not a SentencePiece model"):
        Tokenizer.from_serialized(b"\x00\x01")
