"""The token store: equal batches to the in-memory corpus, reuse, crash safety, refusal of damage, bounded memory."""

import hashlib
import json
import os
import pickle
import random
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import torch

from transformer.data.pipeline.batch import collate
from transformer.data.pipeline.dataset import encode_corpus
from transformer.data.pipeline.stored_corpus import StoredCorpus, _lengths
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.data.pipeline.token_batch_sampler import TokenBatchSampler
from transformer.data.pipeline.token_store import (
    ARRAY_FILES,
    MANIFEST_FILE,
    TokenStoreError,
    ids_dtype,
    open_token_store,
    store_key,
)
from transformer.data.pipeline.token_store_builder import build_token_store, prepare_token_store
from transformer.data.pipeline.tokenizer import Tokenizer

ENGLISH_WORDS = [
    "a",
    "dog",
    "cat",
    "runs",
    "the",
    "man",
    "woman",
    "red",
    "blue",
    "small",
    "house",
    "garden",
    "ball",
    "plays",
    "walks",
    "street",
    "park",
]
GERMAN_WORDS = [
    "ein",
    "Hund",
    "Katze",
    "läuft",
    "der",
    "Mann",
    "Frau",
    "rot",
    "blau",
    "klein",
    "Haus",
    "Garten",
    "Ball",
    "spielt",
    "geht",
    "Straße",
    "Park",
]


def synthetic_lines(count: int, seed: int, max_words: int = 30) -> tuple[list[str], list[str]]:
    """Random sentences of 1 to ``max_words`` words, with a few empty sides so the filter drops some pairs."""
    rng = random.Random(seed)
    sources, targets = [], []
    for index in range(count):
        length = rng.randint(1, max_words)
        source = " ".join(rng.choice(ENGLISH_WORDS) for _ in range(length))
        target = " ".join(rng.choice(GERMAN_WORDS) for _ in range(length + rng.randint(-1, 2)))
        if index % 97 == 5:
            source = ""
        sources.append(source)
        targets.append(target)
    return sources, targets


def write_corpus(directory: Path, count: int, seed: int = 0, max_words: int = 30) -> tuple[Path, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    sources, targets = synthetic_lines(count, seed, max_words)
    source_path, target_path = directory / "train.en", directory / "train.de"
    source_path.write_text("".join(f"{line}\n" for line in sources), encoding="utf-8")
    target_path.write_text("".join(f"{line}\n" for line in targets), encoding="utf-8")
    return source_path, target_path


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Tokenizer:
    sources, targets = synthetic_lines(500, seed=1)
    return Tokenizer.train(sources + targets, tmp_path_factory.mktemp("vocabulary") / "tokenizer.model", 120)


@pytest.fixture
def corpus_files(tmp_path: Path) -> tuple[Path, Path]:
    return write_corpus(tmp_path / "text", 400)


def test_store_batches_equal_the_in_memory_batches(
    tmp_path: Path, corpus_files, tokenizer: Tokenizer
) -> None:
    in_memory = encode_corpus(read_parallel_files(*corpus_files), tokenizer, max_len=24)
    # Chunks of 37 pairs: the offsets must carry across chunk boundaries.
    store = prepare_token_store(
        tmp_path / "store", corpus_files, tokenizer, 24, chunk_pairs=37, num_threads=1
    )
    stored = StoredCorpus(store)
    assert stored.report == in_memory.report
    assert in_memory.report.dropped_empty > 0 and in_memory.report.dropped_too_long > 0
    assert len(stored) == len(in_memory)
    np.testing.assert_array_equal(stored.source_lengths, in_memory.source_lengths)
    np.testing.assert_array_equal(stored.target_lengths, in_memory.target_lengths)
    assert stored.source_lengths.dtype == np.int32 and stored.target_lengths.dtype == np.int32
    assert [stored.source[i] for i in range(len(stored))] == in_memory.source
    assert [stored.target[i] for i in range(len(stored))] == in_memory.target
    sampler = TokenBatchSampler(stored.source_lengths, stored.target_lengths, max_tokens=200, seed=4)
    reference = TokenBatchSampler(in_memory.source_lengths, in_memory.target_lengths, max_tokens=200, seed=4)
    for epoch in (0, 1):
        batches = sampler.batches(epoch)
        assert batches == reference.batches(epoch)
        for indices in batches:
            from_store, from_memory = collate(indices, stored), collate(indices, in_memory)
            for name in ("src_tokens", "tgt_input", "tgt_output"):
                assert torch.equal(getattr(from_store, name), getattr(from_memory, name))
            assert from_store.num_target_tokens == from_memory.num_target_tokens
            assert from_store.padding_ratio == from_memory.padding_ratio


def test_manifest_records_what_the_store_was_built_from(tmp_path: Path, corpus_files, tokenizer) -> None:
    store = prepare_token_store(tmp_path / "store", corpus_files, tokenizer, 24, num_threads=1)
    manifest = json.loads((tmp_path / "store" / MANIFEST_FILE).read_text())
    assert manifest["version"] == 1 and manifest["tokenizer_fingerprint"] == tokenizer.fingerprint
    assert [entry["path"] for entry in manifest["source_files"]] == [
        str(path.resolve()) for path in corpus_files
    ]
    assert manifest["source_files"][0]["bytes"] == corpus_files[0].stat().st_size
    assert manifest["pairs"] == store.num_pairs and manifest["input_pairs"] == 400
    assert manifest["dropped"]["empty"] + manifest["dropped"]["too_long"] + manifest["pairs"] == 400
    assert manifest["max_len"] == 24 and manifest["dtype"] == "<u2"
    for name in ARRAY_FILES:
        assert manifest["files"][name]["bytes"] == (tmp_path / "store" / name).stat().st_size
        assert len(manifest["files"][name]["sha256"]) == 64
    assert manifest["source_sha256"] == [
        hashlib.sha256(path.read_bytes()).hexdigest() for path in corpus_files
    ]


def touch_later(path: Path) -> None:
    """Give a file a modification time one minute later, as ``touch`` or a copy without ``-p`` would."""
    status = path.stat()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns + 60 * 10**9))


def test_touched_corpus_files_reuse_the_store_after_comparing_their_hashes(
    tmp_path: Path, corpus_files, tokenizer, monkeypatch
) -> None:
    directory = tmp_path / "store"
    built = prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    arrays = {name: (directory / name).read_bytes() for name in ARRAY_FILES}
    for path in corpus_files:
        touch_later(path)
    monkeypatch.setattr(Tokenizer, "encode_batch", lambda *args, **kwargs: pytest.fail("encoded again"))
    notes: list[str] = []
    store = prepare_token_store(directory, corpus_files, tokenizer, 24, message=notes.append)
    assert store.num_pairs == built.num_pairs and "their SHA-256 did not" in notes[0]
    assert {name: (directory / name).read_bytes() for name in ARRAY_FILES} == arrays
    # The manifest now holds the new times: the next start compares times alone, without hashing.
    recorded = [entry["mtime_ns"] for entry in store.manifest["source_files"]]
    assert recorded == [path.stat().st_mtime_ns for path in corpus_files]
    monkeypatch.setattr(
        "transformer.data.pipeline.token_store_builder.sha256_of_file", lambda path: pytest.fail("hashed")
    )
    notes.clear()
    prepare_token_store(directory, corpus_files, tokenizer, 24, message=notes.append)
    assert notes[0].startswith("token store: reusing") and "SHA-256 did not" not in notes[0]


def test_a_corpus_edited_to_the_same_size_or_a_store_without_hashes_is_encoded_again(
    tmp_path: Path, corpus_files, tokenizer
) -> None:
    directory = tmp_path / "store"
    prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    text = corpus_files[1].read_bytes()
    corpus_files[1].write_bytes(text.replace(b"Hund", b"Haus", 1))  # same size, new content and time
    touch_later(corpus_files[1])
    notes: list[str] = []
    prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1, message=notes.append)
    assert "encoding" in notes[0] and "the corpus files' contents changed" in notes[0]
    # A store written before the sources' hashes were recorded cannot tell a touch from an edit.
    manifest_path = directory / MANIFEST_FILE
    manifest = json.loads(manifest_path.read_text())
    del manifest["source_sha256"]
    manifest_path.write_text(json.dumps(manifest))
    touch_later(corpus_files[0])
    notes.clear()
    prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1, message=notes.append)
    assert "encoding" in notes[0] and "the store records no SHA-256 to compare" in notes[0]


def test_second_prepare_reuses_the_store(tmp_path: Path, corpus_files, tokenizer, monkeypatch) -> None:
    directory = tmp_path / "store"
    prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    times = {path.name: path.stat().st_mtime_ns for path in directory.iterdir()}
    calls = []
    monkeypatch.setattr(Tokenizer, "encode_batch", lambda *args, **kwargs: calls.append(1) or [])
    notes: list[str] = []
    store = prepare_token_store(directory, corpus_files, tokenizer, 24, message=notes.append, verify=True)
    assert calls == [] and store.num_pairs > 0
    assert {path.name: path.stat().st_mtime_ns for path in directory.iterdir()} == times
    assert notes and "reusing" in notes[0] and "SHA-256 checked" in notes[0]


def test_changed_corpus_or_max_len_rebuilds_the_store(tmp_path: Path, corpus_files, tokenizer) -> None:
    directory = tmp_path / "store"
    first = prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1).num_pairs
    notes: list[str] = []
    assert prepare_token_store(directory, corpus_files, tokenizer, 12, num_threads=1, message=notes.append)
    assert "encoding" in notes[0]
    write_corpus(corpus_files[0].parent, 200, seed=9)
    rebuilt = prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    assert rebuilt.manifest["input_pairs"] == 200 and rebuilt.num_pairs != first


def test_prepare_killed_midway_leaves_no_store_and_the_next_one_succeeds(
    tmp_path: Path, corpus_files, tokenizer
) -> None:
    directory = tmp_path / "stores" / "train"

    def die_after_two_chunks(pairs_read: int) -> None:
        if pairs_read >= 100:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        prepare_token_store(
            directory, corpus_files, tokenizer, 24, chunk_pairs=50, progress=die_after_two_chunks
        )
    assert list(directory.parent.iterdir()) == []  # no store and no temporary directory
    # A SIGKILL leaves the hidden temporary directory behind, with arrays but no manifest.
    leftover = directory.parent / ".train.tmp-0123456789ab"
    leftover.mkdir()
    (leftover / "source_ids.bin").write_bytes(b"\0" * 10)
    store = prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    assert store.num_pairs > 0
    assert sorted(path.name for path in directory.parent.iterdir()) == ["train"]


def test_a_store_without_manifest_is_rebuilt(tmp_path: Path, corpus_files, tokenizer) -> None:
    directory = tmp_path / "store"
    directory.mkdir()
    (directory / "source_ids.bin").write_bytes(b"half")
    assert prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1).num_pairs > 0
    with pytest.raises(TokenStoreError, match="never finished"):
        open_token_store(tmp_path / "elsewhere")


def test_misaligned_files_leave_no_store(tmp_path: Path, corpus_files, tokenizer) -> None:
    with corpus_files[1].open("a", encoding="utf-8") as handle:
        handle.write("eine Zeile zu viel\n")
    with pytest.raises(CorpusError, match=r"has 400 lines but .* has 401"):
        prepare_token_store(tmp_path / "store", corpus_files, tokenizer, 24, chunk_pairs=50, num_threads=1)
    assert not (tmp_path / "store").exists()


@pytest.mark.parametrize("name", ["target_ids.bin", "source_offsets.bin"])
def test_a_truncated_array_is_refused_naming_the_file(tmp_path: Path, corpus_files, tokenizer, name) -> None:
    directory = tmp_path / "store"
    prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    path = directory / name
    path.write_bytes(path.read_bytes()[:-2])
    with pytest.raises(TokenStoreError) as raised:
        prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    message = str(raised.value)
    assert str(path) in message and "\n" not in message and "bytes but the manifest records" in message


def test_a_flipped_byte_is_refused_when_verifying(tmp_path: Path, corpus_files, tokenizer) -> None:
    directory = tmp_path / "store"
    prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    path = directory / "source_ids.bin"
    data = bytearray(path.read_bytes())
    data[5] ^= 0xFF
    path.write_bytes(bytes(data))
    # Sizes are checked at every open; checksums only on request (see the module notes).
    assert open_token_store(directory).num_pairs > 0
    with pytest.raises(TokenStoreError, match=re.escape(f"{path}: SHA-256 differs from the manifest")):
        prepare_token_store(directory, corpus_files, tokenizer, 24, verify=True)


def test_offsets_that_decrease_are_refused_when_the_lengths_are_read(
    tmp_path: Path, corpus_files, tokenizer
) -> None:
    directory = tmp_path / "store"
    prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    path = directory / "source_offsets.bin"
    offsets = np.fromfile(path, dtype="<i8")
    offsets[4] = offsets[3] - 1  # pair 3 would have length -1
    offsets.tofile(path)
    store = open_token_store(directory)  # sizes, first and last offsets are intact: opening alone passes
    with pytest.raises(TokenStoreError, match=re.escape(f"{path}: offsets decrease at pair 3 (damaged")):
        StoredCorpus(store)


def test_a_pair_of_2_to_the_32_tokens_cannot_hide_in_the_int32_lengths() -> None:
    """Lengths are int32: a difference of 2**32 wraps to 0, which the sum check must catch."""
    path = Path("store/source_offsets.bin")
    assert _lengths(np.array([0, 5, 5, 8], dtype=np.int64), path).tolist() == [5, 0, 3]
    with pytest.raises(TokenStoreError, match=re.escape(f"{path}: a pair spans 2**31 tokens or more")):
        _lengths(np.array([0, 5, 5 + 2**32, 8 + 2**32], dtype=np.int64), path)


def test_a_missing_array_or_broken_manifest_is_refused(tmp_path: Path, corpus_files, tokenizer) -> None:
    directory = tmp_path / "store"
    prepare_token_store(directory, corpus_files, tokenizer, 24, num_threads=1)
    (directory / "target_offsets.bin").unlink()
    with pytest.raises(
        TokenStoreError,
        match=re.escape(f"{directory / 'target_offsets.bin'}: array file of the token store is missing"),
    ):
        open_token_store(directory)
    (directory / MANIFEST_FILE).write_text("{not json")
    with pytest.raises(
        TokenStoreError,
        match=re.escape(f"{directory / MANIFEST_FILE}: the token store manifest is not valid JSON"),
    ):
        prepare_token_store(directory, corpus_files, tokenizer, 24)


def test_ids_are_uint16_when_the_vocabulary_fits_else_uint32() -> None:
    assert ids_dtype(37000) == np.dtype("<u2")
    assert ids_dtype(65536) == np.dtype("<u2")
    assert ids_dtype(65537) == np.dtype("<u4")


class LargeVocabulary:
    """A stand-in tokenizer with 100,000 pieces: ids above 65,535 need uint32."""

    vocab_size = 100_000
    fingerprint = "f" * 64

    def encode_batch(self, texts: list[str], num_threads: int | None = None) -> list[list[int]]:
        return [[70_000 + len(word) for word in text.split()] for text in texts]


def test_a_large_vocabulary_is_stored_as_uint32(tmp_path: Path) -> None:
    pairs = [("a bb ccc", "dddd"), ("eeeee", "f gg")]
    key = store_key([], LargeVocabulary.fingerprint, 10, 2)
    store = build_token_store(tmp_path / "store", pairs, LargeVocabulary(), 10, key)  # type: ignore[arg-type]
    assert store.manifest["dtype"] == "<u4" and store.source_ids.dtype == np.dtype("<u4")
    corpus = StoredCorpus(store)
    assert corpus.source[0] == [70_001, 70_002, 70_003, 2] and corpus.target[1] == [70_001, 70_002]


def test_stored_corpus_indexing_and_pickling(tmp_path: Path, corpus_files, tokenizer) -> None:
    corpus = StoredCorpus(prepare_token_store(tmp_path / "store", corpus_files, tokenizer, 24, num_threads=1))
    assert corpus.source[-1] == corpus.source[len(corpus) - 1]
    assert corpus.target[1:3] == [corpus.target[1], corpus.target[2]]
    with pytest.raises(IndexError, match="outside the"):
        corpus.source[len(corpus)]
    copy = pickle.loads(pickle.dumps(corpus))
    assert copy.store.directory == corpus.store.directory and copy.source[3] == corpus.source[3]
    assert len(pickle.dumps(corpus)) < 1000  # reopened by path, not copied
    assert corpus.pair_indices is None


def test_building_a_store_keeps_memory_far_below_the_in_memory_path(tmp_path: Path, tokenizer) -> None:
    # 200,000 short pairs: the in-memory path's peak grows with the corpus, the store's with one chunk.
    files = write_corpus(tmp_path / "large", 200_000, seed=3, max_words=8)
    tracemalloc.start()
    try:
        corpus = encode_corpus(read_parallel_files(*files), tokenizer, max_len=64)
        _, in_memory_peak = tracemalloc.get_traced_memory()
        kept = len(corpus)
        del corpus
        tracemalloc.reset_peak()
        store = prepare_token_store(
            tmp_path / "store", files, tokenizer, 64, chunk_pairs=5_000, num_threads=1
        )
        _, store_peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert store.num_pairs == kept
    assert store_peak * 10 < in_memory_peak, (store_peak, in_memory_peak)


def test_store_files_get_a_plain_files_mode(tmp_path: Path, corpus_files, tokenizer) -> None:
    prepare_token_store(tmp_path / "store", corpus_files, tokenizer, 24, num_threads=1)
    umask = os.umask(0)
    os.umask(umask)
    for name in (*ARRAY_FILES, MANIFEST_FILE):
        assert (tmp_path / "store" / name).stat().st_mode & 0o777 == 0o666 & ~umask
