"""The large-corpus generator: deterministic, aligned, WMT14-like lengths, bounded memory, safe with files."""

import gzip
import json
import random
import re
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from transformer.data.corpora import large_corpus
from transformer.data.corpora.large_corpus import (
    MANIFEST_FILE,
    TARGET_LOG_SIGMA,
    TARGET_MEDIAN_WORDS,
    LengthStatistics,
    find_large_corpus,
    read_large_corpus_manifest,
    word_count_statistics,
    write_large_corpus,
)
from transformer.data.pipeline.text_files import CorpusError

SOURCE_PAIRS = 2_000
WORDS = ["a", "dog", "runs", "the", "man", "red", "ball", "park", "with", "near", "small", "plays", "in"]
#: Mean of the target log-normal: median * exp(sigma^2 / 2), about 23.9 words.
TARGET_MEAN_WORDS = TARGET_MEDIAN_WORDS * np.exp(TARGET_LOG_SIGMA**2 / 2)
#: Sentence i of each side starts with its own marker word, so an output line splits into its pairs uniquely.
SOURCE_MARKER, TARGET_MARKER = re.compile(r"e\d+"), re.compile(r"d\d+")


def caption_like_pairs(count: int, seed: int) -> tuple[list[str], list[str]]:
    """Pairs of 3 to 21 words (mean 12, like Multi30k's captions); side i starts with marker e{i} or d{i}."""
    rng = random.Random(seed)
    sources, targets = [], []
    for index in range(count):
        length = rng.randint(2, 20)
        sources.append(" ".join([f"e{index}", *(rng.choice(WORDS) for _ in range(length))]) + ".")
        targets.append(" ".join([f"d{index}", *(rng.choice(WORDS).upper() for _ in range(length - 1))]))
    return sources, targets


@pytest.fixture(scope="module")
def source_corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[tuple[Path, Path], list[str], list[str]]:
    directory = tmp_path_factory.mktemp("source")
    sources, targets = caption_like_pairs(SOURCE_PAIRS, seed=0)
    source_path, target_path = directory / "train.en", directory / "train.de.gz"
    source_path.write_text("".join(f"{line}\n" for line in sources), encoding="utf-8")
    with gzip.open(target_path, "wt", encoding="utf-8") as handle:  # gzipped, as Multi30k is distributed
        handle.writelines(f"{line}\n" for line in targets)
    return (source_path, target_path), sources, targets


def split_into_pairs(line: str, marker: re.Pattern[str]) -> list[int]:
    return [int(word[1:]) for word in line.split() if marker.fullmatch(word)]


def test_same_seed_gives_the_same_bytes_and_a_prefix_of_larger_corpora(tmp_path: Path, source_corpus) -> None:
    files, _, _ = source_corpus
    first = write_large_corpus(files, tmp_path / "first", 3_000, seed=7)
    again = write_large_corpus(files, tmp_path / "again", 3_000, seed=7)
    other = write_large_corpus(files, tmp_path / "other", 3_000, seed=8)
    smaller = write_large_corpus(files, tmp_path / "smaller", 1_000, seed=7)
    for side in (0, 1):
        assert first[side].read_bytes() == again[side].read_bytes()
        assert first[side].read_bytes() != other[side].read_bytes()
        lines = first[side].read_bytes().splitlines(keepends=True)
        assert smaller[side].read_bytes() == b"".join(lines[:1_000])
    assert [path.name for path in first] == ["train.en", "train.de"]


def test_every_line_joins_the_same_source_pairs_on_both_sides(tmp_path: Path, source_corpus) -> None:
    files, sources, targets = source_corpus
    source_path, target_path = write_large_corpus(files, tmp_path / "out", 2_345, seed=1)
    source_text, target_text = source_path.read_text("utf-8"), target_path.read_text("utf-8")
    assert source_text.endswith("\n") and target_text.endswith("\n")
    source_lines, target_lines = source_text.split("\n")[:-1], target_text.split("\n")[:-1]
    assert len(source_lines) == len(target_lines) == 2_345
    parts_per_line = []
    for source_line, target_line in zip(source_lines, target_lines, strict=True):
        pair_ids = split_into_pairs(source_line, SOURCE_MARKER)
        assert pair_ids and split_into_pairs(target_line, TARGET_MARKER) == pair_ids
        assert source_line == " ".join(sources[index] for index in pair_ids)
        assert target_line == " ".join(targets[index] for index in pair_ids)
        parts_per_line.append(len(pair_ids))
    manifest = read_large_corpus_manifest(tmp_path / "out")
    assert manifest is not None and manifest["single_pair_lines"] == parts_per_line.count(1)


def test_lengths_follow_the_target_and_the_manifest_measures_them(tmp_path: Path, source_corpus) -> None:
    files, _, _ = source_corpus
    paths = write_large_corpus(files, tmp_path / "out", 20_000, seed=2)
    statistics = word_count_statistics(paths[0])
    # The target: mean 23.9, median 20, 99th percentile 81 words; lines land within half a caption of it.
    assert abs(statistics.mean_words - TARGET_MEAN_WORDS) < 0.1 * TARGET_MEAN_WORDS, statistics
    assert abs(statistics.median_words - TARGET_MEDIAN_WORDS) <= 2, statistics
    assert 70 <= statistics.p99_words <= 95 and statistics.max_words > 100, statistics
    manifest = read_large_corpus_manifest(tmp_path / "out")
    assert manifest is not None
    assert manifest["statistics"]["source"] == statistics.__dict__
    assert manifest["statistics"]["target"] == word_count_statistics(paths[1]).__dict__


def test_lines_of_several_pairs_are_distinct(tmp_path: Path, source_corpus) -> None:
    files, _, _ = source_corpus
    source_path, _ = write_large_corpus(files, tmp_path / "out", 20_000, seed=3)
    lines = source_path.read_text("utf-8").splitlines()
    several = [line for line in lines if len(split_into_pairs(line, SOURCE_MARKER)) > 1]
    assert len(set(several)) > 0.995 * len(several)
    # Only a line of one pair repeats a source sentence, so duplicates are bounded by those lines.
    manifest = read_large_corpus_manifest(tmp_path / "out")
    assert manifest is not None
    duplicates = len(lines) - len(set(lines))
    assert duplicates <= manifest["single_pair_lines"] + 0.005 * len(several)
    assert 0.3 < manifest["single_pair_lines"] / len(lines) < 0.55


def test_memory_stays_flat_as_the_corpus_grows(tmp_path: Path, source_corpus) -> None:
    files, _, _ = source_corpus
    peaks, sizes = {}, {}
    for pairs in (50_000, 200_000):
        tracemalloc.start()
        try:
            paths = write_large_corpus(files, tmp_path / str(pairs), pairs)
            peaks[pairs] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        sizes[pairs] = sum(path.stat().st_size for path in paths)
    # Four times the lines, the same peak: the source corpus and one 20,000-line step, never the output.
    assert peaks[200_000] < 1.25 * peaks[50_000], peaks
    assert peaks[200_000] * 4 < sizes[200_000], (peaks, sizes)


def test_an_existing_file_is_replaced_only_if_written_here_and_unchanged(
    tmp_path: Path, source_corpus
) -> None:
    files, _, _ = source_corpus
    output_dir = tmp_path / "out"
    output_dir.mkdir()
    foreign = output_dir / "train.de"
    foreign.write_text("someone else's corpus\n", encoding="utf-8")
    with pytest.raises(FileExistsError, match=re.escape(f"{foreign}: exists and was not written")):
        write_large_corpus(files, output_dir, 100)
    assert foreign.read_text(encoding="utf-8") == "someone else's corpus\n"
    assert sorted(path.name for path in output_dir.iterdir()) == ["train.de"]
    foreign.unlink()
    paths = write_large_corpus(files, output_dir, 100, seed=0)
    paths = write_large_corpus(files, output_dir, 200, seed=5)  # its own files: replaced
    assert len(paths[0].read_text("utf-8").splitlines()) == 200
    with paths[0].open("a", encoding="utf-8") as handle:
        handle.write("an edit\n")
    with pytest.raises(FileExistsError, match="changed since"):
        write_large_corpus(files, output_dir, 100)


def test_an_interrupted_write_leaves_the_previous_corpus_usable(
    tmp_path: Path, source_corpus, monkeypatch: pytest.MonkeyPatch
) -> None:
    files, _, _ = source_corpus
    output_dir = tmp_path / "out"
    paths = write_large_corpus(files, output_dir, 300, seed=1)
    before = [path.read_bytes() for path in paths]

    def interrupt(*args: object) -> bytes:
        raise KeyboardInterrupt

    monkeypatch.setattr(large_corpus, "_render", interrupt)
    with pytest.raises(KeyboardInterrupt):
        write_large_corpus(files, output_dir, 300, seed=2)
    assert sorted(path.name for path in output_dir.iterdir()) == [MANIFEST_FILE, "train.de", "train.en"]
    assert [path.read_bytes() for path in paths] == before
    assert find_large_corpus(files, output_dir, 300, seed=1) == paths


def test_find_reuses_only_the_same_request_with_unchanged_files(tmp_path: Path, source_corpus) -> None:
    files, _, _ = source_corpus
    output_dir = tmp_path / "out"
    assert find_large_corpus(files, output_dir, 400, seed=3) is None
    paths = write_large_corpus(files, output_dir, 400, seed=3)
    assert find_large_corpus(files, output_dir, 400, seed=3) == paths
    assert find_large_corpus(files, output_dir, 401, seed=3) is None
    assert find_large_corpus(files, output_dir, 400, seed=4) is None
    paths[1].write_bytes(paths[1].read_bytes())  # same bytes, a new modification time
    assert find_large_corpus(files, output_dir, 400, seed=3) is None


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"pairs": 0}, "write_large_corpus: pairs=0 must be positive"),
        ({"pairs": -3}, "write_large_corpus: pairs=-3 must be positive"),
        ({"seed": -1}, "write_large_corpus: seed=-1 must be non-negative"),
        ({"target_lang": "en"}, "write_large_corpus: source_lang and target_lang are both 'en'"),
        (
            {"source_lang": "a/b"},
            "write_large_corpus: source_lang='a/b' must be a file suffix without separators",
        ),
    ],
)
def test_bad_arguments_are_refused_in_one_line(tmp_path: Path, source_corpus, arguments, message) -> None:
    files, _, _ = source_corpus
    with pytest.raises(ValueError) as raised:
        write_large_corpus(files, tmp_path / "out", **{"pairs": 10, **arguments})
    assert str(raised.value) == message
    assert not (tmp_path / "out").exists()


def test_a_missing_or_unusable_source_is_refused_naming_it(tmp_path: Path, source_corpus) -> None:
    files, _, _ = source_corpus
    missing = tmp_path / "nowhere" / "train.en.gz"
    with pytest.raises(CorpusError, match=re.escape(f"cannot read {missing}: No such file or directory")):
        write_large_corpus((missing, files[1]), tmp_path / "out", 10)
    with pytest.raises(CorpusError, match=re.escape(f"cannot read {missing}")):
        find_large_corpus((files[0], missing), tmp_path / "out", 10)
    empty_sides = tmp_path / "empty.en", tmp_path / "empty.de"
    empty_sides[0].write_text("a caption\n\n", encoding="utf-8")
    empty_sides[1].write_text("\neine Beschreibung\n", encoding="utf-8")
    with pytest.raises(ValueError, match="have no pair with two non-empty sides"):
        write_large_corpus(empty_sides, tmp_path / "out", 10)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / MANIFEST_FILE).write_text(json.dumps({"format": "other"}), encoding="utf-8")
    with pytest.raises(ValueError, match="not a large-corpus manifest"):
        write_large_corpus(files, tmp_path / "broken", 10)


def test_statistics_from_a_histogram_are_exact_word_counts() -> None:
    histogram = np.zeros(101, dtype=np.int64)
    histogram[[3, 10, 100]] = [50, 49, 1]  # 100 lines
    statistics = LengthStatistics.from_histogram(histogram)
    assert statistics == LengthStatistics(
        lines=100,
        mean_words=(150 + 490 + 100) / 100,
        median_words=3,
        p90_words=10,
        p99_words=10,
        max_words=100,
    )
    with pytest.raises(ValueError, match="no lines counted"):
        LengthStatistics.from_histogram(np.zeros(4, dtype=np.int64))
