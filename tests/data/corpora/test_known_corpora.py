"""Known corpora: checksummed, atomic caching from a mirror or downloader, and local directories."""

import hashlib
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

from transformer.data.corpora.known_corpora import (
    KNOWN_CORPORA,
    CorpusSpec,
    fetch_corpus,
    local_directory_corpus,
)
from transformer.data.corpora.remote_files import ChecksumMismatchError, Downloader, RemoteFile, download_url
from transformer.data.pipeline.file_digests import sha256_of_file
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files

SHARED_MULTI30K = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "multi30k"
needs_multi30k = pytest.mark.skipif(
    not SHARED_MULTI30K.is_dir(), reason=f"no Multi30k copy at {SHARED_MULTI30K}"
)
MULTI30K_FILES = ("train.en.gz", "train.de.gz", "val.en.gz", "val.de.gz")


@pytest.fixture
def mirror(tmp_path: Path) -> Path:
    directory = tmp_path / "mirror"
    directory.mkdir()
    for name in MULTI30K_FILES:
        shutil.copyfile(SHARED_MULTI30K / name, directory / name)
    return directory


def cache_entries(cache_dir: Path) -> list[str]:
    return sorted(path.name for path in (cache_dir / "multi30k").iterdir())


@needs_multi30k
def test_registered_checksums_match_the_distributed_files() -> None:
    spec = KNOWN_CORPORA["multi30k"]
    assert (spec.source_lang, spec.target_lang) == ("en", "de")
    remote_files = [remote for pair in spec.splits.values() for remote in pair]
    assert [remote.filename for remote in remote_files] == list(MULTI30K_FILES)
    for remote in remote_files:
        assert (
            remote.url == f"https://github.com/multi30k/dataset/raw/master/data/task1/raw/{remote.filename}"
        )
        assert sha256_of_file(SHARED_MULTI30K / remote.filename) == remote.sha256


@needs_multi30k
def test_fetch_from_a_mirror_fills_the_cache(tmp_path: Path, mirror: Path) -> None:
    cache_dir = tmp_path / "cache"
    files = fetch_corpus("multi30k", cache_dir, mirror=str(mirror))
    assert files == {
        "train": (cache_dir / "multi30k" / "train.en.gz", cache_dir / "multi30k" / "train.de.gz"),
        "valid": (cache_dir / "multi30k" / "val.en.gz", cache_dir / "multi30k" / "val.de.gz"),
    }
    assert cache_entries(cache_dir) == sorted(MULTI30K_FILES)  # no temporary files left
    assert len(read_parallel_files(*files["valid"])) == 1_014


@needs_multi30k
def test_fetch_accepts_a_file_url_mirror(tmp_path: Path, mirror: Path) -> None:
    files = fetch_corpus("multi30k", tmp_path / "cache", mirror=mirror.as_uri())
    assert sha256_of_file(files["train"][1]) == sha256_of_file(mirror / "train.de.gz")


@needs_multi30k
def test_a_second_fetch_uses_the_cache(tmp_path: Path, mirror: Path) -> None:
    cache_dir = tmp_path / "cache"
    first = fetch_corpus("multi30k", cache_dir, mirror=str(mirror))
    stamps = {path: path.stat().st_mtime_ns for pair in first.values() for path in pair}

    def refuse(url: str, destination: IO[bytes]) -> None:
        raise AssertionError(f"downloaded {url} although it is cached")

    shutil.rmtree(mirror)  # the mirror is gone: only the cache can answer
    second = fetch_corpus("multi30k", cache_dir, downloader=refuse)
    assert second == first
    assert {path: path.stat().st_mtime_ns for pair in second.values() for path in pair} == stamps


@needs_multi30k
def test_fetch_downloads_the_registered_urls(tmp_path: Path) -> None:
    requested: list[str] = []

    def from_shared_copy(url: str, destination: IO[bytes]) -> None:
        requested.append(url)
        destination.write((SHARED_MULTI30K / url.rsplit("/", 1)[1]).read_bytes())

    cache_dir = tmp_path / "cache"
    (cache_dir / "multi30k").mkdir(parents=True)
    (cache_dir / "multi30k" / "val.de.gz").write_bytes(b"stale partial download")
    fetch_corpus("multi30k", cache_dir, downloader=from_shared_copy)
    expected_urls = [remote.url for pair in KNOWN_CORPORA["multi30k"].splits.values() for remote in pair]
    assert requested == expected_urls  # the stale file with a wrong checksum is replaced
    assert cache_entries(cache_dir) == sorted(MULTI30K_FILES)
    fetch_corpus("multi30k", cache_dir, downloader=from_shared_copy)
    assert len(requested) == 4


@needs_multi30k
def test_a_corrupt_mirror_file_is_refused_and_never_cached(tmp_path: Path, mirror: Path) -> None:
    corrupt = bytearray((mirror / "train.de.gz").read_bytes())
    corrupt[1000] ^= 0xFF
    (mirror / "train.de.gz").write_bytes(bytes(corrupt))
    cache_dir = tmp_path / "cache"
    (cache_dir / "multi30k").mkdir(parents=True)
    (cache_dir / "multi30k" / "train.de.gz").write_bytes(b"previous content")
    expected = KNOWN_CORPORA["multi30k"].splits["train"][1].sha256
    actual = sha256_of_file(mirror / "train.de.gz")
    with pytest.raises(
        ChecksumMismatchError, match=rf"train\.de\.gz from .* has sha256 {actual}, expected {expected}"
    ):
        fetch_corpus("multi30k", cache_dir, mirror=str(mirror))
    assert (cache_dir / "multi30k" / "train.de.gz").read_bytes() == b"previous content"
    assert cache_entries(cache_dir) == ["train.de.gz", "train.en.gz"]  # no temporary file left


def test_unknown_corpus_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown corpus 'wmt99'; known corpora: multi30k"):
        fetch_corpus("wmt99", tmp_path)


def test_a_mirror_without_the_file_is_an_error(tmp_path: Path) -> None:
    empty_mirror = tmp_path / "empty_mirror"
    empty_mirror.mkdir()
    with pytest.raises(CorpusError, match=r"empty_mirror has no file train\.en\.gz"):
        fetch_corpus("multi30k", tmp_path / "cache", mirror=str(empty_mirror))
    assert cache_entries(tmp_path / "cache") == []


def test_default_downloader_reads_urls_and_reports_failures(tmp_path: Path) -> None:
    source = tmp_path / "source.txt"
    source.write_bytes(b"payload")
    with (tmp_path / "copy.txt").open("wb") as handle:
        download_url(source.as_uri(), handle)
    assert (tmp_path / "copy.txt").read_bytes() == b"payload"
    with (
        pytest.raises(CorpusError, match=r"cannot download file://.*absent\.txt"),
        (tmp_path / "copy2.txt").open("wb") as handle,
    ):
        download_url((tmp_path / "absent.txt").as_uri(), handle)


# --------------------------------------------------------------------------- cache writes (no network, no Multi30k)

TINY_SOURCE, TINY_TARGET = b"A dog.\nA cat.\n", b"Ein Hund.\nEine Katze.\n"


@pytest.fixture
def tiny_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """Register a two-file corpus whose checksums are those of TINY_SOURCE and TINY_TARGET."""

    def remote(name: str, content: bytes) -> RemoteFile:
        digest = hashlib.sha256(content).hexdigest()
        return RemoteFile(url=f"https://example.org/{name}", sha256=digest, filename=name)

    spec = CorpusSpec(
        name="tiny",
        source_lang="en",
        target_lang="de",
        splits={"train": (remote("train.en", TINY_SOURCE), remote("train.de", TINY_TARGET))},
        description="two lines",
        citation="none",
    )
    monkeypatch.setitem(KNOWN_CORPORA, "tiny", spec)


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


def serve(contents: dict[str, bytes]) -> Downloader:
    def downloader(url: str, destination: IO[bytes]) -> None:
        destination.write(contents[url.rsplit("/", 1)[1]])

    return downloader


@pytest.mark.usefixtures("tiny_corpus", "umask_022")
def test_cached_files_are_verified_and_readable_by_others(tmp_path: Path) -> None:
    files = fetch_corpus(
        "tiny", tmp_path, downloader=serve({"train.en": TINY_SOURCE, "train.de": TINY_TARGET})
    )
    source, target = files["train"]
    assert (source.read_bytes(), target.read_bytes()) == (TINY_SOURCE, TINY_TARGET)
    for path in (source, target):
        assert stat.S_IMODE(path.stat().st_mode) == 0o644  # 0666 less the umask, not mkstemp's 0600
    assert sorted(path.name for path in (tmp_path / "tiny").iterdir()) == ["train.de", "train.en"]


@pytest.mark.usefixtures("tiny_corpus")
def test_a_failed_checksum_leaves_no_file_and_no_temporary_file(tmp_path: Path) -> None:
    wrong = serve({"train.en": b"A dog.\nA bird.\n", "train.de": TINY_TARGET})
    with pytest.raises(
        ChecksumMismatchError, match=r"train\.en from https://example\.org/train\.en has sha256"
    ):
        fetch_corpus("tiny", tmp_path, downloader=wrong)
    assert list((tmp_path / "tiny").iterdir()) == []


@pytest.mark.usefixtures("tiny_corpus")
def test_a_failed_checksum_keeps_the_previous_cache_entry(tmp_path: Path) -> None:
    (tmp_path / "tiny").mkdir()
    (tmp_path / "tiny" / "train.en").write_bytes(b"partial")
    with pytest.raises(ChecksumMismatchError):
        fetch_corpus("tiny", tmp_path, downloader=serve({"train.en": b"also wrong", "train.de": TINY_TARGET}))
    assert [path.name for path in (tmp_path / "tiny").iterdir()] == ["train.en"]
    assert (tmp_path / "tiny" / "train.en").read_bytes() == b"partial"


@pytest.mark.usefixtures("tiny_corpus")
def test_an_interrupted_download_leaves_no_temporary_file(tmp_path: Path) -> None:
    def cut_off(url: str, destination: IO[bytes]) -> None:
        destination.write(TINY_SOURCE[:5])
        raise CorpusError(f"cannot download {url}: connection reset")

    with pytest.raises(CorpusError, match="connection reset"):
        fetch_corpus("tiny", tmp_path, downloader=cut_off)
    assert list((tmp_path / "tiny").iterdir()) == []


def test_remote_file_is_validated() -> None:
    with pytest.raises(ValueError, match="is not 64 lowercase hex digits"):
        RemoteFile(url="https://example.org/a.gz", sha256="abc", filename="a.gz")
    with pytest.raises(ValueError, match="must be a bare file name"):
        RemoteFile(url="https://example.org/a.gz", sha256="0" * 64, filename="../a.gz")


def test_local_directory_finds_splits_plain_or_gzipped(tmp_path: Path) -> None:
    for name in ("train.en", "train.de.gz", "val.en.gz", "val.de.gz", "test.en", "test.de", "test.de.gz"):
        (tmp_path / name).write_bytes(b"")
    assert local_directory_corpus(tmp_path, "en", "de") == {
        "train": (tmp_path / "train.en", tmp_path / "train.de.gz"),
        "valid": (tmp_path / "val.en.gz", tmp_path / "val.de.gz"),
        "test": (tmp_path / "test.en", tmp_path / "test.de"),  # the plain file wins over its .gz twin
    }


def test_local_directory_errors_name_what_is_missing(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match=r"data directory .*nowhere does not exist"):
        local_directory_corpus(tmp_path / "nowhere", "en", "de")
    (tmp_path / "valid.en").write_bytes(b"")
    (tmp_path / "valid.de").write_bytes(b"")
    with pytest.raises(CorpusError, match=r"has no training files train\.en\[\.gz\] and train\.de\[\.gz\]"):
        local_directory_corpus(tmp_path, "en", "de")
    (tmp_path / "train.en").write_bytes(b"")
    with pytest.raises(CorpusError, match=r"found .*train\.en but no train\.de\[\.gz\]"):
        local_directory_corpus(tmp_path, "en", "de")
