"""Known parallel corpora: where to download them, their checksums, and a verified local cache.

``fetch_corpus("multi30k", cache_dir)`` returns the files of each split, downloading each one at most once.
Two kinds of corpus are known: those published as one file per split and language (Multi30k,
:class:`CorpusSpec`), used as downloaded, and those published as archives of many texts (WMT14,
:class:`transformer.data.corpora.archive_corpus.ArchiveCorpusSpec`), extracted once into plain files. Every download
is checked against its published checksum before it enters the cache, and enters it atomically, so the cache
never holds a partial or wrong file. ``mirror`` points at a local copy (a directory or ``file://`` URL holding
the same file names) for machines without network access. ``local_directory_corpus`` finds the files of a
corpus you already have.
"""

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from transformer.data.corpora.archive_corpus import ArchiveCorpusSpec, fetch_archive_corpus
from transformer.data.corpora.remote_files import Downloader, RemoteFile, fetch_remote_file
from transformer.data.corpora.wmt14 import WMT14_EN_DE, WMT14_EN_FR
from transformer.data.pipeline.text_files import CorpusError


@dataclass(frozen=True)
class CorpusSpec:
    """A parallel corpus: its language pair and the source and target file of each split.

    Parameters
    ----------
    name : str
        Key in :data:`KNOWN_CORPORA` and directory name in the cache.
    source_lang, target_lang : str
        Language codes, e.g. "en" and "de".
    splits : dict[str, tuple[RemoteFile, RemoteFile]]
        (source file, target file) per split name ("train", "valid", ...).
    description : str
        What the corpus is, in one sentence.
    citation : str
        Who to cite when using it.

    Notes
    -----
    Splits are named "train" and "valid" whatever the publisher calls them.
    """

    name: str
    source_lang: str
    target_lang: str
    splits: dict[str, tuple[RemoteFile, RemoteFile]]
    description: str
    citation: str


def _multi30k_file(filename: str, sha256: str) -> RemoteFile:
    base_url = "https://github.com/multi30k/dataset/raw/master/data/task1/raw"
    return RemoteFile(url=f"{base_url}/{filename}", sha256=sha256, filename=filename)


# SHA-256 of the files as the multi30k/dataset repository distributes them: computed with sha256sum
# over local copies of those files (the project's shared data directory), not re-downloaded here.
MULTI30K = CorpusSpec(
    name="multi30k",
    source_lang="en",
    target_lang="de",
    splits={
        "train": (
            _multi30k_file("train.en.gz", "d79cfa999dd4c51d2cb42499b6796d5a882c3a8a961923c25a898c90f8bbd56f"),
            _multi30k_file("train.de.gz", "726e39b2fa9eb9ffb6dc763fb35a179f80fae06ffc5d28b6ace5faa883de28a6"),
        ),
        "valid": (
            _multi30k_file("val.en.gz", "14f7d25ddd868909a9213e361768460edcacdd6ab9d1e77b92560dc10c10dc28"),
            _multi30k_file("val.de.gz", "f0cba2f995189cf5770f29a8a9a537a3ad3f51657ad873405082ff6863a5e75a"),
        ),
    },
    description=(
        "Multi30k task 1: English image descriptions (Flickr30k) with professional German "
        "translations; 29,000 training and 1,014 validation pairs."
    ),
    citation=(
        "Elliott, Frank, Sima'an and Specia (2016). Multi30K: Multilingual English-German Image "
        "Descriptions. Proceedings of the 5th Workshop on Vision and Language."
    ),
)

KNOWN_CORPORA: dict[str, CorpusSpec | ArchiveCorpusSpec] = {
    spec.name: spec for spec in (MULTI30K, WMT14_EN_DE, WMT14_EN_FR)
}


def corpus_languages(name: str) -> tuple[str, str]:
    """Give the (source, target) languages a known corpus is published in.

    Parameters
    ----------
    name : str
        A key of :data:`KNOWN_CORPORA`.

    Returns
    -------
    tuple of (str, str)
        E.g. ("en", "de"); :func:`fetch_corpus` also serves the reverse direction.

    Raises
    ------
    ValueError
        Listing the known names for an unknown corpus.

    Notes
    -----
    Only the published direction is given; :func:`fetch_corpus` serves the reverse direction from the same
    files, so a German-to-English run needs no corpus of its own.
    """
    if name not in KNOWN_CORPORA:
        raise ValueError(f"unknown corpus {name!r}; known corpora: {', '.join(sorted(KNOWN_CORPORA))}")
    spec = KNOWN_CORPORA[name]
    return spec.source_lang, spec.target_lang


def fetch_corpus(
    name: str,
    cache_dir: Path,
    *,
    mirror: str | None = None,
    downloader: Downloader | None = None,
    source_lang: str | None = None,
    target_lang: str | None = None,
    message: Callable[[str], None] | None = None,
) -> dict[str, tuple[Path, Path]]:
    """Return the verified local files of a known corpus, downloading only what the cache lacks.

    Parameters
    ----------
    name : str
        A key of :data:`KNOWN_CORPORA`, e.g. "multi30k" or "wmt14-en-de".
    cache_dir : pathlib.Path
        Cache root; a corpus's files live in ``cache_dir / name`` (created if missing), downloaded
        archives in ``cache_dir / "archives"``.
    mirror : str or None
        A local directory or ``file://`` URL (copied from) or an http(s) URL (downloaded from)
        that holds the corpus files under their usual names; None downloads from the publisher.
    downloader : Downloader or None
        Replaces :func:`~transformer.data.corpora.remote_files.download_url`, e.g. in tests; it receives the URL and a binary file open for
        writing, which it must write the bytes into and leave open.
    source_lang, target_lang : str or None
        The direction wanted; None for the corpus's own. The reverse of the corpus's direction swaps the
        two files of every split (Multi30k German to English, WMT14 German to English).
    message : callable or None
        Receives one-line progress notes (downloads and extraction of large corpora).

    Returns
    -------
    dict[str, tuple[pathlib.Path, pathlib.Path]]
        (source file, target file) per split: as distributed for Multi30k (gzipped; the readers in
        :mod:`transformer.data.pipeline.text_files` decompress transparently), extracted plain text for WMT14.

    Raises
    ------
    ValueError
        Listing the known names for an unknown corpus, or naming ``data.source_lang``/``data.target_lang`` for
        languages the corpus does not have.
    ChecksumMismatchError
        Naming the file and both hashes when a fetched file has another checksum.

    Notes
    -----
    A cached file with the right checksum is used as is (no network access). A fetched file whose checksum
    differs is never written to the cache.
    """
    corpus_source, corpus_target = corpus_languages(name)
    wanted = (source_lang or corpus_source, target_lang or corpus_target)
    if wanted not in ((corpus_source, corpus_target), (corpus_target, corpus_source)):
        raise ValueError(
            f"data.corpus={name} is {corpus_source}-{corpus_target}, but data.source_lang={wanted[0]} and "
            f"data.target_lang={wanted[1]}; set them to {corpus_source} and {corpus_target} (or the reverse)"
        )
    spec = KNOWN_CORPORA[name]
    files: dict[str, tuple[Path, Path]]
    if isinstance(spec, ArchiveCorpusSpec):
        files = fetch_archive_corpus(spec, cache_dir, mirror=mirror, downloader=downloader, message=message)
    else:
        corpus_dir = Path(cache_dir).expanduser() / name
        files = {
            split: (
                fetch_remote_file(source_file, corpus_dir, mirror, downloader),
                fetch_remote_file(target_file, corpus_dir, mirror, downloader),
            )
            for split, (source_file, target_file) in spec.splits.items()
        }
    if wanted != (corpus_source, corpus_target):
        files = {split: (target, source) for split, (source, target) in files.items()}
    return files


# File-name prefixes accepted for each split, in order of preference.
SPLIT_FILE_PREFIXES = {"train": ("train",), "valid": ("valid", "val", "dev"), "test": ("test",)}


def _find_split_file(data_dir: Path, prefix: str, lang: str) -> Path | None:
    # A plain file wins over its gzipped twin, which is what `gunzip --keep` leaves behind.
    for candidate in (data_dir / f"{prefix}.{lang}", data_dir / f"{prefix}.{lang}.gz"):
        if candidate.is_file():
            return candidate
    return None


def local_directory_corpus(
    data_dir: Path, source_lang: str, target_lang: str
) -> dict[str, tuple[Path, Path]]:
    """Find the split files of a parallel corpus in a directory.

    Parameters
    ----------
    data_dir : pathlib.Path
        Directory with files named ``{split}.{lang}`` or ``{split}.{lang}.gz``.
    source_lang, target_lang : str
        Language codes used as file suffixes, e.g. "en" and "de".

    Returns
    -------
    dict[str, tuple[pathlib.Path, pathlib.Path]]
        (source file, target file) for "train" and for "valid" and "test" when present.

    Raises
    ------
    CorpusError
        When the directory or the training files are missing, or when a split has a file for one language
        only.

    Notes
    -----
    The validation split may be named ``valid``, ``val`` or ``dev`` (first found wins).
    """
    data_dir = Path(data_dir).expanduser()
    if not data_dir.is_dir():
        raise CorpusError(f"data directory {data_dir} does not exist")
    splits: dict[str, tuple[Path, Path]] = {}
    for split, prefixes in SPLIT_FILE_PREFIXES.items():
        for prefix in prefixes:
            source = _find_split_file(data_dir, prefix, source_lang)
            target = _find_split_file(data_dir, prefix, target_lang)
            if source is None and target is None:
                continue
            if source is None or target is None:
                present, missing_lang = (source or target), (source_lang if source is None else target_lang)
                raise CorpusError(f"{data_dir}: found {present} but no {prefix}.{missing_lang}[.gz]")
            splits[split] = (source, target)
            break
    if "train" not in splits:
        raise CorpusError(
            f"{data_dir} has no training files train.{source_lang}[.gz] and train.{target_lang}[.gz]"
        )
    return splits
