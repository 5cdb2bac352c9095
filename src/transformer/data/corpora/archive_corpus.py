"""Corpora published as archives: which texts inside which tarballs make each split, and their extraction.

The WMT shared tasks publish their data as tarballs holding many language pairs at once, some sentences as
plain text, some gzipped, the test sets in WMT's SGML-like format. An :class:`ArchiveCorpusSpec` names, for
each split, the parallel texts it concatenates (:class:`ParallelText`: a source and a target member of an
archive). :func:`fetch_archive_corpus` downloads the archives once (verified, shared between corpora that use
the same archive), then streams each split's members into one plain UTF-8 file per language, with a manifest
that lets later runs reuse the files without reading them again.
"""

import gzip
import hashlib
import json
import re
import tarfile
import zlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from transformer.atomic_files import atomic_write, write_text_atomically
from transformer.data.corpora.remote_files import Downloader, RemoteFile, fetch_remote_file
from transformer.data.pipeline.text_files import CorpusError

#: Version of the extraction; part of the manifest's fingerprint, so a change here re-extracts old caches.
EXTRACTION_FORMAT = 1
MANIFEST_FILE = "manifest.json"
#: Downloaded archives live here, under the cache root, shared by every corpus built from them.
ARCHIVE_DIRECTORY = "archives"

_SEGMENT = re.compile(r"<seg.*?>(.*)</seg>.*?")
_WHITESPACE = re.compile(r"\s+")
_BYTE_ORDER_MARK = b"\xef\xbb\xbf"


@dataclass(frozen=True)
class ArchiveText:
    """One text file inside an archive.

    Parameters
    ----------
    archive : RemoteFile
        The tarball (``.tgz``, ``.tar``) that holds it.
    member : str
        Its path inside the archive, e.g. "training/europarl-v7.de-en.de". A name ending in ".gz" is
        decompressed; one ending in ".sgm" is WMT's SGML-like test-set format, of which only the ``<seg>``
        contents are kept.

    Notes
    -----
    Member names are compared without a leading "./", which some tar programs add.
    """

    archive: RemoteFile
    member: str


@dataclass(frozen=True)
class ParallelText:
    """A source text and its sentence-aligned translation, both inside archives.

    Parameters
    ----------
    name : str
        What it is, e.g. "europarl-v7"; used in messages.
    source : ArchiveText
        The source-language side.
    target : ArchiveText
        The target-language side, line ``i`` translating line ``i`` of the source.

    Notes
    -----
    Extraction checks that both sides have the same number of lines and refuses the corpus otherwise.
    """

    name: str
    source: ArchiveText
    target: ArchiveText


@dataclass(frozen=True)
class ArchiveCorpusSpec:
    """A parallel corpus whose splits are concatenations of texts inside published archives.

    Parameters
    ----------
    name : str
        Key in :data:`transformer.data.corpora.known_corpora.KNOWN_CORPORA` and directory name in the cache.
    source_lang, target_lang : str
        Language codes, e.g. "en" and "de".
    splits : dict[str, tuple[ParallelText, ...]]
        The parallel texts of each split ("train", "valid", "test"), concatenated in this order.
    description : str
        What the corpus is, in one sentence or two.
    citation : str
        Who to cite when using it.
    sacrebleu_test_sets : dict[str, str]
        The sacreBLEU test-set name of each split that sacreBLEU knows (e.g. {"test": "wmt14/full"}), so a
        score can be reproduced with ``sacrebleu -t NAME -l SRC-TGT``.

    Notes
    -----
    Splits are named "train", "valid" and "test" whatever the publisher calls them.
    """

    name: str
    source_lang: str
    target_lang: str
    splits: dict[str, tuple[ParallelText, ...]]
    description: str
    citation: str
    sacrebleu_test_sets: dict[str, str] = field(default_factory=dict)

    @property
    def archives(self) -> list[RemoteFile]:
        """Every archive the corpus reads, each once, in order of first use.

        Returns
        -------
        list of RemoteFile
            The archives to download.

        Notes
        -----
        One archive often serves several splits or both languages (and several corpora: Europarl v7 holds
        German and French), so it is listed and downloaded once.
        """
        seen: dict[str, RemoteFile] = {}
        for texts in self.splits.values():
            for text in texts:
                for side in (text.source, text.target):
                    seen.setdefault(side.archive.filename, side.archive)
        return list(seen.values())

    def fingerprint(self) -> str:
        """Hash everything that decides the extracted files' content.

        Returns
        -------
        str
            SHA-256 hex digest of the splits (archives with their checksums, members, order) and the
            extraction format.

        Notes
        -----
        Stored in the manifest: a cache extracted under another specification or another version of the
        extraction is not reused.
        """
        description = {
            "format": EXTRACTION_FORMAT,
            "languages": [self.source_lang, self.target_lang],
            "splits": {
                split: [asdict(text) for text in texts] for split, texts in sorted(self.splits.items())
            },
        }
        return hashlib.sha256(json.dumps(description, sort_keys=True).encode("utf-8")).hexdigest()


def _normalised_member_name(name: str) -> str:
    return name[2:] if name.startswith("./") else name


def _member_lines(archive_path: Path, member: str) -> Iterator[bytes]:
    r"""Stream the lines (bytes, "\n" kept) of one archive member, decompressing a ".gz" member.

    Parameters
    ----------
    archive_path : pathlib.Path
        The verified tarball.
    member : str
        The member's path inside it.

    Yields
    ------
    bytes
        One line at a time.

    Notes
    -----
    The archive is read as a stream ("r|*"): no index of members is built and nothing is extracted to disk,
    so a 2.5 GB tarball costs one sequential read up to the member. Raises CorpusError naming the archive
    when the member is missing or the archive is corrupt.
    """
    wanted = _normalised_member_name(member)
    try:
        with tarfile.open(archive_path, mode="r|*") as archive:
            for entry in archive:
                if _normalised_member_name(entry.name) != wanted or not entry.isfile():
                    continue
                extracted = archive.extractfile(entry)
                assert extracted is not None  # a regular file
                stream: IO[bytes] | gzip.GzipFile = (
                    gzip.GzipFile(fileobj=extracted) if wanted.endswith(".gz") else extracted
                )
                yield from stream
                return
    except (tarfile.TarError, OSError, EOFError, zlib.error) as error:
        raise CorpusError(f"{archive_path}: cannot read {member} (corrupt archive?): {error}") from None
    raise CorpusError(f"{archive_path} has no member {member}")


def sgml_segments(lines: Iterator[str]) -> Iterator[str]:
    """Keep the sentences of a WMT SGML test-set file: the text of each ``<seg ...>`` line.

    Parameters
    ----------
    lines : iterator of str
        The file's lines.

    Yields
    ------
    str
        Each segment's text, whitespace runs collapsed to one space and stripped.

    Notes
    -----
    The files are not well-formed XML (unescaped ampersands), so, as sacreBLEU does for the same files,
    a line counts when it starts with "<seg " and its text is what lies between the tag and "</seg>",
    entities left as written; the test checks the output equals sacreBLEU's own conversion.
    """
    for line in lines:
        if line.startswith("<seg "):
            yield _WHITESPACE.sub(" ", _SEGMENT.sub(r"\1", line).strip())


def _text_lines(archive_path: Path, text: ArchiveText, replaced: list[int]) -> Iterator[bytes]:
    r"""Yield the member's sentences as UTF-8 lines ending in "\n", ready to be concatenated.

    Parameters
    ----------
    archive_path : pathlib.Path
        The verified tarball.
    text : ArchiveText
        Which member.
    replaced : list of int
        One-element counter, incremented for every line whose invalid UTF-8 bytes were replaced.

    Yields
    ------
    bytes
        One line at a time.

    Notes
    -----
    A byte-order mark at the member's start is dropped (in the middle of a concatenated file no reader
    would drop it). A last line without "\n" gets one, so the next member starts on its own line. Invalid
    UTF-8 (a few lines of web-crawled corpora) becomes U+FFFD rather than failing a multi-gigabyte
    extraction; the count is kept in the manifest. Lines are split on "\n" only, never on "\r" or the
    Unicode separators, which would break the alignment with the other language.
    """
    lines = _member_lines(archive_path, text.member)
    if text.member.endswith(".sgm"):
        decoded = (line.decode("utf-8", errors="replace") for line in lines)
        for segment in sgml_segments(decoded):
            yield segment.encode("utf-8") + b"\n"
        return
    for index, line in enumerate(lines):
        if index == 0 and line.startswith(_BYTE_ORDER_MARK):
            line = line[len(_BYTE_ORDER_MARK) :]
        try:
            line.decode("utf-8")
        except UnicodeDecodeError:
            replaced[0] += 1
            line = line.decode("utf-8", errors="replace").encode("utf-8")
        yield line if line.endswith(b"\n") else line + b"\n"


def _copy_lines(lines: Iterator[bytes], destination: IO[bytes]) -> int:
    count = 0
    for line in lines:
        destination.write(line)
        count += 1
    return count


def _split_file_names(spec: ArchiveCorpusSpec, split: str) -> tuple[str, str]:
    return f"{split}.{spec.source_lang}", f"{split}.{spec.target_lang}"


def _read_manifest(corpus_dir: Path) -> dict[str, Any] | None:
    try:
        manifest = json.loads((corpus_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def _manifest_is_current(manifest: dict[str, Any] | None, spec: ArchiveCorpusSpec, corpus_dir: Path) -> bool:
    if manifest is None or manifest.get("fingerprint") != spec.fingerprint():
        return False
    files = manifest.get("files", {})
    for split in spec.splits:
        for name in _split_file_names(spec, split):
            path = corpus_dir / name
            if name not in files or not path.is_file() or path.stat().st_size != files[name].get("bytes"):
                return False
    return True


def _fetch_archives(
    spec: ArchiveCorpusSpec,
    cache_root: Path,
    *,
    mirror: str | None,
    downloader: Downloader | None,
    tell: Callable[[str], None],
) -> dict[str, Path]:
    """Download (or find already verified) every archive of ``spec``; the local path of each by file name."""
    archives: dict[str, Path] = {}
    for remote in spec.archives:
        tell(
            f"{spec.name}: fetching {remote.filename}"
            + (f" ({remote.size / 1e6:,.0f} MB)" if remote.size else "")
        )
        archives[remote.filename] = fetch_remote_file(
            remote, cache_root / ARCHIVE_DIRECTORY, mirror=mirror, downloader=downloader
        )
    return archives


def _extract_split(
    spec: ArchiveCorpusSpec,
    split: str,
    texts: tuple[ParallelText, ...],
    archives: dict[str, Path],
    corpus_dir: Path,
    tell: Callable[[str], None],
) -> tuple[tuple[Path, Path], dict[str, dict[str, int]]]:
    """Concatenate a split's parallel texts into its two files, each written atomically.

    Returns the (source, target) paths and each file's manifest entry: its size, its line count and how many
    of its lines had invalid UTF-8 replaced.
    """
    source_name, target_name = _split_file_names(spec, split)
    source_path, target_path = corpus_dir / source_name, corpus_dir / target_name
    replaced = {source_name: [0], target_name: [0]}
    pairs = 0
    with atomic_write(source_path, "wb") as source_file, atomic_write(target_path, "wb") as target_file:
        for text in texts:
            tell(f"{spec.name}: extracting {text.name} into {split}")
            pairs += _extract_parallel_text(
                spec,
                split,
                text,
                archives,
                (source_file, target_file),
                (replaced[source_name], replaced[target_name]),
            )
    described = {
        name: {"bytes": path.stat().st_size, "lines": pairs, "invalid_utf8_lines": replaced[name][0]}
        for name, path in ((source_name, source_path), (target_name, target_path))
    }
    tell(f"{spec.name}: {split} has {pairs:,} pairs")
    return (source_path, target_path), described


def _extract_parallel_text(
    spec: ArchiveCorpusSpec,
    split: str,
    text: ParallelText,
    archives: dict[str, Path],
    destinations: tuple[IO[bytes], IO[bytes]],
    replaced: tuple[list[int], list[int]],
) -> int:
    """Append one parallel text's two sides to the split's files; its number of pairs.

    Raises CorpusError naming both members when the sides differ in line count.
    """
    source_file, target_file = destinations
    source_lines = _copy_lines(
        _text_lines(archives[text.source.archive.filename], text.source, replaced[0]), source_file
    )
    target_lines = _copy_lines(
        _text_lines(archives[text.target.archive.filename], text.target, replaced[1]), target_file
    )
    if source_lines != target_lines:
        raise CorpusError(
            f"{spec.name} {split}: {text.name} has {source_lines:,} lines in "
            f"{text.source.archive.filename}:{text.source.member} but {target_lines:,} in "
            f"{text.target.archive.filename}:{text.target.member}"
        )
    return source_lines


def fetch_archive_corpus(
    spec: ArchiveCorpusSpec,
    cache_dir: Path,
    *,
    mirror: str | None = None,
    downloader: Downloader | None = None,
    message: Callable[[str], None] | None = None,
) -> dict[str, tuple[Path, Path]]:
    """Return the plain-text files of each split, downloading and extracting only what the cache lacks.

    Parameters
    ----------
    spec : ArchiveCorpusSpec
        The corpus.
    cache_dir : pathlib.Path
        Cache root: archives go to ``cache_dir/archives``, the extracted splits to ``cache_dir/spec.name``.
    mirror : str or None
        A local directory or ``file://`` URL (copied from) or an http(s) URL (downloaded from) holding the
        archives under their published names; None downloads from the publishers.
    downloader : Downloader or None
        Replaces the default URL downloader, e.g. in tests.
    message : callable or None
        Receives one-line progress notes (an extraction of WMT14 takes minutes).

    Returns
    -------
    dict[str, tuple[pathlib.Path, pathlib.Path]]
        (source file, target file) per split: ``{split}.{source_lang}`` and ``{split}.{target_lang}``, plain
        UTF-8, one sentence per line.

    Raises
    ------
    CorpusError
        Naming the archive and members when the two sides of a parallel text differ in line count.

    Notes
    -----
    Reuse costs no reading: the manifest (written last) records the specification's fingerprint and each
    file's size, and matching sizes are trusted. Otherwise the manifest is removed first, every split file is
    rewritten atomically (a temporary sibling renamed into place once complete), and the manifest is written
    at the end, so a kill at any point leaves either a complete, described cache or one that the next run
    re-extracts; verified archives are kept either way. Memory stays at one line, whatever the corpus size.
    """
    tell = message or (lambda text: None)
    cache_root = Path(cache_dir).expanduser()
    corpus_dir = cache_root / spec.name
    manifest = _read_manifest(corpus_dir)
    if _manifest_is_current(manifest, spec, corpus_dir):
        return {
            split: tuple(corpus_dir / name for name in _split_file_names(spec, split))  # type: ignore[misc]
            for split in spec.splits
        }
    archives = _fetch_archives(spec, cache_root, mirror=mirror, downloader=downloader, tell=tell)
    corpus_dir.mkdir(parents=True, exist_ok=True)
    (corpus_dir / MANIFEST_FILE).unlink(missing_ok=True)
    files: dict[str, tuple[Path, Path]] = {}
    described: dict[str, dict[str, int]] = {}
    for split, texts in spec.splits.items():
        files[split], split_described = _extract_split(spec, split, texts, archives, corpus_dir, tell)
        described.update(split_described)
    write_text_atomically(
        corpus_dir / MANIFEST_FILE,
        json.dumps({"fingerprint": spec.fingerprint(), "corpus": spec.name, "files": described}, indent=2)
        + "\n",
    )
    return files
