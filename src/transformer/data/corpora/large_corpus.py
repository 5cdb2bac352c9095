"""Large parallel corpora with roughly WMT14-like sentence lengths, built from a small real corpus: no download.

Issue #18 asks for training at the paper's data sizes (WMT14 EN-DE, 4.5 million pairs; EN-FR, 36 million)
through the token store. Testing that path needs corpora of those sizes, which are a long download and tens
of gigabytes; :func:`write_large_corpus` writes one of any size from the 29,000 Multi30k training pairs
instead, in minutes and with no network.

Each output pair is a concatenation of randomly drawn source pairs, both sides in the same order, so every
line still translates its partner and the text is real English and German. How many pairs a line joins is
chosen so that its source word count follows a target distribution resembling WMT14's
(:func:`draw_target_word_counts`), where Multi30k's own captions average 12 words. The random combination is
the only perturbation: lines of two or more pairs are almost all distinct, while a line made of a single
pair repeats a Multi30k sentence verbatim (see :func:`write_large_corpus` for the share).

What such a corpus is good for: its line count, byte size and length statistics are those of a large corpus,
so vocabulary sampling, token-store building, batching and start-up can be measured at scale. What not: its
content is 29,000 sentences recombined, so a model trained on it learns Multi30k, not WMT.
"""

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from transformer.atomic_files import atomic_write, write_json_atomically
from transformer.data.pipeline.text_files import CorpusError, iter_lines, read_parallel_files
from transformer.data.pipeline.token_store import describe_source_files

#: Median words per source line of the target distribution (see :func:`draw_target_word_counts`).
TARGET_MEDIAN_WORDS = 20.0
#: Standard deviation of the natural logarithm of the target word count.
TARGET_LOG_SIGMA = 0.6
#: Longest target word count; the log-normal puts about 1 line in 80,000 above it.
MAX_TARGET_WORDS = 250
#: Written last into the output directory: the request, the outputs' sizes and times, their statistics.
MANIFEST_FILE = "large_corpus.json"
MANIFEST_FORMAT = "transformer-large-corpus"
#: Version of the generation procedure; a corpus of another version is regenerated.
GENERATOR_VERSION = 1
#: Lines drawn per step. Every step draws this many whatever is left to write, so a corpus of N pairs is the
#: first N lines of any larger one with the same seed; a step's text is about 3 MB per side.
_CHUNK_LINES = 20_000


@dataclass(frozen=True)
class LengthStatistics:
    """Words per line of one side of a corpus (whitespace-separated words).

    Parameters
    ----------
    lines : int
        Number of lines.
    mean_words : float
        Mean words per line.
    median_words, p90_words, p99_words : int
        50th, 90th and 99th percentiles: the smallest count with at least that share of lines at or below it.
    max_words : int
        Longest line in words.

    Notes
    -----
    Build one with :meth:`from_histogram` or :func:`word_count_statistics`.
    """

    lines: int
    mean_words: float
    median_words: int
    p90_words: int
    p99_words: int
    max_words: int

    @classmethod
    def from_histogram(cls, histogram: np.ndarray) -> "LengthStatistics":
        """Summarise a histogram of words per line.

        Parameters
        ----------
        histogram : numpy.ndarray, shape (max_words + 1,), int
            ``histogram[w]`` lines have ``w`` words.

        Returns
        -------
        LengthStatistics
            Count, mean, percentiles and maximum.

        Raises
        ------
        ValueError
            For an empty histogram.

        Notes
        -----
        Exact (no interpolation): a percentile is always a word count some line has.
        """
        counts = np.asarray(histogram, dtype=np.int64)
        lines = int(counts.sum())
        if lines == 0:
            raise ValueError("LengthStatistics.from_histogram: no lines counted")
        cumulative = np.cumsum(counts)

        def percentile(share: float) -> int:
            return int(np.searchsorted(cumulative, math.ceil(share * lines)))

        return cls(
            lines=lines,
            mean_words=float(np.dot(np.arange(len(counts)), counts) / lines),
            median_words=percentile(0.5),
            p90_words=percentile(0.9),
            p99_words=percentile(0.99),
            max_words=int(np.flatnonzero(counts)[-1]),
        )


def word_count_statistics(path: Path) -> LengthStatistics:
    """Measure the words per line of a text file, plain or gzipped, streaming.

    Parameters
    ----------
    path : pathlib.Path
        A UTF-8 file with one sentence per line.

    Returns
    -------
    LengthStatistics
        Count, mean, percentiles and maximum of ``len(line.split())``.

    Notes
    -----
    Memory holds one line and a histogram, whatever the file's size; reading is the readers' of
    :mod:`transformer.data.pipeline.text_files` (their errors name the file). About 200,000 lines per second on one core.
    """
    histogram = np.zeros(1, dtype=np.int64)
    for line in iter_lines(path):
        words = len(line.split())
        if words >= len(histogram):
            histogram = np.pad(histogram, (0, words + 1 - len(histogram)))
        histogram[words] += 1
    return LengthStatistics.from_histogram(histogram)


def draw_target_word_counts(rng: np.random.Generator, count: int) -> np.ndarray:
    """Draw source-line word counts from the target distribution.

    Parameters
    ----------
    rng : numpy.random.Generator
        The random source.
    count : int
        How many to draw.

    Returns
    -------
    numpy.ndarray, shape (count,), int64
        Word counts in 1..``MAX_TARGET_WORDS``.

    Notes
    -----
    A log-normal with median ``TARGET_MEDIAN_WORDS`` (20) and log standard deviation ``TARGET_LOG_SIGMA``
    (0.6), rounded: mean about 24 words, 90th percentile 43, 99th 81, so about 1% of lines exceed 80 words.
    Why these: the English side of WMT14 EN-DE's training data (Europarl, Common Crawl, News Commentary) is
    commonly described as averaging roughly 22-25 words per line, with a long right tail of lines past 80
    words; a log-normal has that shape (skewed right, never below one word). The numbers are an approximation
    chosen to resemble WMT14, not statistics measured on it here.
    """
    drawn = rng.lognormal(mean=math.log(TARGET_MEDIAN_WORDS), sigma=TARGET_LOG_SIGMA, size=count)
    return np.clip(np.rint(drawn), 1, MAX_TARGET_WORDS).astype(np.int64)


@dataclass(frozen=True)
class _PairPool:
    """The source corpus ready to be recombined: each side's sentences as bytes, and their word counts.

    ``pieces[i]`` is sentence i followed by a space, ``pieces[size + i]`` the same followed by a newline, so a
    line is a join of pieces with no per-line Python work.
    """

    source_pieces: list[bytes]
    target_pieces: list[bytes]
    source_words: np.ndarray
    target_words: np.ndarray

    @property
    def size(self) -> int:
        return len(self.source_words)


def _load_pool(source_files: tuple[Path, Path]) -> _PairPool:
    """Read the source corpus, keeping the pairs with two non-empty sides."""
    pairs = [(source, target) for source, target in read_parallel_files(*source_files) if source and target]
    if not pairs:
        raise ValueError(f"{source_files[0]} and {source_files[1]} have no pair with two non-empty sides")
    # Words are counted on the text, not the bytes: str.split also splits at non-ASCII spaces (U+00A0, ...),
    # as word_count_statistics does when it reads the output back.
    words = [np.array([len(pair[side].split()) for pair in pairs], dtype=np.int64) for side in (0, 1)]
    sides = [[pair[side].encode("utf-8") for pair in pairs] for side in (0, 1)]
    pieces = [[text + b" " for text in side] + [text + b"\n" for text in side] for side in sides]
    return _PairPool(pieces[0], pieces[1], words[0], words[1])


def _draw_lines(pool: _PairPool, rng: np.random.Generator, num_lines: int) -> tuple[np.ndarray, np.ndarray]:
    """Choose the source pairs of ``num_lines`` lines; return (pair index, line number) per part, in order.

    Each line draws pairs one at a time and takes a drawn pair if the line is still empty or if the pair
    brings the line's source word count closer to its target than stopping would; the first pair it does
    not take ends it. Lines are processed together, one draw per open line per round.
    """
    target_words = draw_target_word_counts(rng, num_lines)
    words = np.zeros(num_lines, dtype=np.int64)
    open_lines = np.arange(num_lines)
    chosen_pairs, chosen_lines = [], []
    while open_lines.size:  # at most MAX_TARGET_WORDS rounds: each taken pair adds at least one word
        candidates = rng.integers(pool.size, size=open_lines.size)
        candidate_words = pool.source_words[candidates]
        current = words[open_lines]
        # Closer after taking it: |current + candidate - target| < target - current.
        taken = (current == 0) | (2 * current + candidate_words < 2 * target_words[open_lines])
        open_lines, candidates = open_lines[taken], candidates[taken]
        chosen_pairs.append(candidates)
        chosen_lines.append(open_lines)
        words[open_lines] += candidate_words[taken]
        open_lines = open_lines[words[open_lines] < target_words[open_lines]]
    lines = np.concatenate(chosen_lines)
    order = np.argsort(lines, kind="stable")  # by line, and within a line in the order drawn
    return np.concatenate(chosen_pairs)[order], lines[order]


def _render(pieces: list[bytes], pairs: np.ndarray, lines: np.ndarray) -> bytes:
    """Join the parts of consecutive lines into text, a newline after each line's last part."""
    line_ends = np.ones(len(lines), dtype=bool)
    line_ends[:-1] = lines[1:] != lines[:-1]
    indices = pairs + (len(pieces) // 2) * line_ends
    return b"".join(map(pieces.__getitem__, indices.tolist()))


def _add_to_histogram(histogram: np.ndarray, word_counts: np.ndarray) -> np.ndarray:
    """Count word counts into a histogram, growing it as needed."""
    counts = np.bincount(word_counts)
    if len(counts) > len(histogram):
        histogram = np.pad(histogram, (0, len(counts) - len(histogram)))
    histogram[: len(counts)] += counts
    return histogram


def read_large_corpus_manifest(output_dir: Path) -> dict[str, Any] | None:
    """Read the manifest :func:`write_large_corpus` leaves in its output directory.

    Parameters
    ----------
    output_dir : pathlib.Path
        The output directory.

    Returns
    -------
    dict or None
        The manifest (request, outputs, ``statistics`` per side, ``single_pair_lines``); None if there is none.

    Raises
    ------
    ValueError
        Naming the file when it exists but is not a manifest of this generator.

    Notes
    -----
    A file that is not a manifest of this generator was not written here, so it is neither trusted nor
    overwritten.
    """
    path = Path(output_dir) / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: not a readable large-corpus manifest ({error}); delete it") from None
    if not isinstance(manifest, dict) or manifest.get("format") != MANIFEST_FORMAT:
        raise ValueError(
            f"{path}: not a large-corpus manifest (format is not {MANIFEST_FORMAT!r}); delete it"
        )
    return manifest


def _check_arguments(pairs: int, seed: int, source_lang: str, target_lang: str) -> None:
    """Refuse a request that cannot be written, in one line naming the argument."""
    if pairs <= 0:
        raise ValueError(f"write_large_corpus: pairs={pairs} must be positive")
    if seed < 0:
        raise ValueError(f"write_large_corpus: seed={seed} must be non-negative")
    for name, suffix in (("source_lang", source_lang), ("target_lang", target_lang)):
        if not suffix or "/" in suffix or os.sep in suffix:
            raise ValueError(
                f"write_large_corpus: {name}={suffix!r} must be a file suffix without separators"
            )
    if source_lang == target_lang:
        raise ValueError(f"write_large_corpus: source_lang and target_lang are both {source_lang!r}")


def _request(
    source_files: tuple[Path, Path], pairs: int, seed: int, source_lang: str, target_lang: str
) -> dict[str, Any]:
    """Describe what decides a corpus's bytes, as JSON-ready values; the sources by path, size and time."""
    try:
        described = describe_source_files(list(source_files))
    except OSError as error:
        raise CorpusError(f"cannot read {error.filename}: {error.strerror}") from None
    return {
        "format": MANIFEST_FORMAT,
        "version": GENERATOR_VERSION,
        "source_files": described,
        "pairs": int(pairs),
        "seed": int(seed),
        "source_lang": source_lang,
        "target_lang": target_lang,
    }


def _output_paths(output_dir: Path, source_lang: str, target_lang: str) -> tuple[Path, Path]:
    return Path(output_dir) / f"train.{source_lang}", Path(output_dir) / f"train.{target_lang}"


def _describe_file(path: Path) -> dict[str, int]:
    status = path.stat()
    return {"bytes": status.st_size, "mtime_ns": status.st_mtime_ns}


def _written_here(manifest: dict[str, Any] | None, path: Path) -> bool:
    """Whether ``path`` is the file the manifest records, unchanged since (same size and time)."""
    outputs = manifest.get("outputs") if manifest is not None else None
    if not isinstance(outputs, dict) or not path.is_file():
        return False
    return outputs.get(path.name) == _describe_file(path)


def find_large_corpus(
    source_files: tuple[Path, Path],
    output_dir: Path,
    pairs: int,
    seed: int = 0,
    source_lang: str = "en",
    target_lang: str = "de",
) -> tuple[Path, Path] | None:
    """Return the files of a corpus already written for exactly this request, if they are still intact.

    Parameters
    ----------
    source_files : (pathlib.Path, pathlib.Path)
        The source corpus, as for :func:`write_large_corpus`.
    output_dir : pathlib.Path
        Where the corpus would be.
    pairs : int
        Lines per file.
    seed : int
        Seed of the random choices.
    source_lang, target_lang : str
        The files' suffixes.

    Returns
    -------
    (pathlib.Path, pathlib.Path) or None
        The source and target files; None when they are missing, were written for another request (sources,
        size, seed, languages, generator version) or changed since.

    Raises
    ------
    CorpusError
        Naming a missing source file.

    Notes
    -----
    Compares the manifest with the request and the files' sizes and modification times; reads no text.
    """
    _check_arguments(pairs, seed, source_lang, target_lang)
    request = _request(source_files, pairs, seed, source_lang, target_lang)
    manifest = read_large_corpus_manifest(output_dir)
    if manifest is None:
        return None
    paths = _output_paths(output_dir, source_lang, target_lang)
    if any(manifest.get(name) != value for name, value in request.items()):
        return None
    return paths if all(_written_here(manifest, path) for path in paths) else None


def _write_lines(pool: _PairPool, paths: tuple[Path, Path], pairs: int, seed: int) -> dict[str, Any]:
    """Write ``pairs`` recombined lines to both files atomically; return their statistics for the manifest."""
    rng = np.random.default_rng(seed)
    histograms = [np.zeros(1, dtype=np.int64), np.zeros(1, dtype=np.int64)]
    single_pair_lines = 0
    remaining = pairs
    with atomic_write(paths[0], "wb") as source_handle, atomic_write(paths[1], "wb") as target_handle:
        while remaining:
            chosen, lines = _draw_lines(pool, rng, _CHUNK_LINES)
            take = min(remaining, _CHUNK_LINES)
            end = int(np.searchsorted(lines, take))  # the parts of the first ``take`` lines
            chosen, lines = chosen[:end], lines[:end]
            source_handle.write(_render(pool.source_pieces, chosen, lines))
            target_handle.write(_render(pool.target_pieces, chosen, lines))
            single_pair_lines += int(np.count_nonzero(np.bincount(lines, minlength=take) == 1))
            for side, words in enumerate((pool.source_words, pool.target_words)):
                line_words = np.bincount(lines, weights=words[chosen], minlength=take).astype(np.int64)
                histograms[side] = _add_to_histogram(histograms[side], line_words)
            remaining -= take
    return {
        "statistics": {
            side: asdict(LengthStatistics.from_histogram(histogram))
            for side, histogram in zip(("source", "target"), histograms, strict=True)
        },
        "single_pair_lines": single_pair_lines,
    }


def write_large_corpus(
    source_files: tuple[Path, Path],
    output_dir: Path,
    pairs: int,
    seed: int = 0,
    source_lang: str = "en",
    target_lang: str = "de",
) -> tuple[Path, Path]:
    """Write ``pairs`` parallel lines recombined from a small corpus, with roughly WMT14-like lengths.

    Parameters
    ----------
    source_files : (pathlib.Path, pathlib.Path)
        The line-aligned source and target files to recombine (plain or gzipped), e.g. Multi30k's
        ``train.en.gz`` and ``train.de.gz``; pairs with an empty side are left out.
    output_dir : pathlib.Path
        Where ``train.{source_lang}``, ``train.{target_lang}`` and the manifest ``large_corpus.json`` go
        (created if missing); usable as ``data.data_dir`` with ``data.corpus: directory``.
    pairs : int
        Lines per file.
    seed : int
        Seed of every random choice.
    source_lang, target_lang : str
        The files' suffixes.

    Returns
    -------
    (pathlib.Path, pathlib.Path)
        The source and target files.

    Raises
    ------
    ValueError
        For a bad argument, or naming the manifest when it is not one of this generator.
    CorpusError
        Naming a missing or malformed source file.
    FileExistsError
        Naming an output file that exists but was not written here (or changed since).

    Notes
    -----
    Line i of each file joins, with single spaces, the same source pairs in the same order, so the files
    stay line-aligned translations. The number of pairs per line follows the source word counts of
    :func:`draw_target_word_counts`: each line takes drawn pairs while they bring it closer to its drawn
    target, so lines land within about half a sentence of it, except that no line is shorter than one
    pair. With Multi30k (12 English words per caption), measured at 200,000 pairs: 24.3 English and 22.8
    German words per line on average, median 20, 99th percentile 81, 1.0% of lines over 80 words, and 42% of
    lines made of a single pair. Those lines are verbatim Multi30k sentences and the only duplicates besides
    rare repeated combinations: 29% of lines repeat an earlier one at 200,000 pairs, tending to 42% as the
    corpus grows. The manifest records the statistics of both sides and the count of single-pair lines.

    Deterministic: the same sources, seed and numpy give the same bytes, and N pairs are the first N lines of
    any larger corpus of the same seed. Memory holds the source corpus (as text while reading it, then twice
    as bytes) and one step of 20,000 lines, whatever ``pairs`` is. Both files are written as hidden siblings,
    fsynced and renamed into place, and the manifest is written last; an existing output file is replaced only
    if the manifest records it as written here and unchanged since.
    """
    _check_arguments(pairs, seed, source_lang, target_lang)
    output_dir = Path(output_dir)
    paths = _output_paths(output_dir, source_lang, target_lang)
    manifest = read_large_corpus_manifest(output_dir)
    for path in paths:
        if (path.exists() or path.is_symlink()) and not _written_here(manifest, path):
            raise FileExistsError(
                f"{path}: exists and was not written by write_large_corpus (or changed since: {MANIFEST_FILE} "
                "does not record it); delete it or choose another output directory"
            )
    pool = _load_pool(source_files)
    request = _request(source_files, pairs, seed, source_lang, target_lang)
    written = _write_lines(pool, paths, pairs, seed)
    outputs = {path.name: _describe_file(path) for path in paths}
    write_json_atomically(output_dir / MANIFEST_FILE, {**request, "outputs": outputs, **written})
    return paths
