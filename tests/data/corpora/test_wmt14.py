"""WMT14 in the corpus registry: the published archives and members, and their extraction from a local mirror.

The real archives (4 GB for English-German, 10 GB for English-French) cannot be downloaded here, so the mirror
tests build small archives with exactly the registered member layout (plain, gzipped and SGML members), and swap
only the checksums in the specification: the member names, the order of the parts and the extraction are the
registered ones.
"""

import dataclasses
import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
import sacrebleu.dataset
from sacrebleu.dataset.fake_sgml import FakeSGMLDataset

from transformer.config.data import DataConfig
from transformer.data.corpora.archive_corpus import (
    ARCHIVE_DIRECTORY,
    MANIFEST_FILE,
    ArchiveCorpusSpec,
    ArchiveText,
    ParallelText,
    sgml_segments,
)
from transformer.data.corpora.known_corpora import KNOWN_CORPORA, fetch_corpus
from transformer.data.corpora.remote_files import ChecksumMismatchError, RemoteFile
from transformer.data.corpora.wmt14 import WMT14_EN_DE, WMT14_EN_FR
from transformer.data.pipeline.file_digests import file_digest
from transformer.data.pipeline.stored_corpus import StoredCorpus
from transformer.data.pipeline.text_files import CorpusError, read_parallel_files
from transformer.data.prepare import prepare_data


def test_the_registry_has_both_pairs_with_the_published_archives() -> None:
    assert KNOWN_CORPORA["wmt14-en-de"] is WMT14_EN_DE and KNOWN_CORPORA["wmt14-en-fr"] is WMT14_EN_FR
    assert (WMT14_EN_DE.source_lang, WMT14_EN_DE.target_lang) == ("en", "de")
    assert [text.name for text in WMT14_EN_DE.splits["train"]] == [
        "europarl-v7",
        "commoncrawl",
        "news-commentary-v9",
    ]
    assert [text.name for text in WMT14_EN_FR.splits["train"]] == [
        "europarl-v7",
        "commoncrawl",
        "un",
        "news-commentary-v9",
        "giga-fren",
    ]
    assert [archive.filename for archive in WMT14_EN_DE.archives] == [
        "training-parallel-europarl-v7.tgz",
        "training-parallel-commoncrawl.tgz",
        "training-parallel-nc-v9.tgz",
        "wmt13-test.tgz",
        "test-full.tgz",
    ]
    for archive in WMT14_EN_DE.archives + WMT14_EN_FR.archives:
        assert archive.url.startswith("https://") and archive.url.endswith((".tgz", ".tar"))
        # Training archives carry the SHA-256 and size TensorFlow Datasets publishes; the test sets the MD5
        # sacreBLEU publishes (none of them has a SHA-256 anywhere official).
        assert archive.checksum[0] == ("md5" if "test" in archive.filename else "sha256")


@pytest.mark.parametrize("spec", [WMT14_EN_DE, WMT14_EN_FR], ids=lambda spec: spec.name)
def test_validation_and_test_sets_are_sacrebleus(spec: ArchiveCorpusSpec) -> None:
    """Same archives (URL and MD5) and same members as sacreBLEU's wmt13 and wmt14/full, so same references."""
    langpair = f"{spec.source_lang}-{spec.target_lang}"
    for split, name in spec.sacrebleu_test_sets.items():
        dataset = sacrebleu.dataset.DATASETS[name]
        (text,) = spec.splits[split]
        assert [text.source.member, text.target.member] == dataset.langpairs[langpair]
        assert [text.source.archive.url] == dataset.data
        assert [text.source.archive.md5] == dataset.md5
        assert text.source.archive == text.target.archive


# ----------------------------------------------------------------------------------------------------------
# A mirror of small archives with the registered layout.

SGML_HEADER = (
    '<srcset setid="newstest" srclang="any">\n<doc sysid="ref" docid="1" genre="news" origlang="en">\n'
)


def sgml(sentences: list[str]) -> str:
    segments = "".join(f'<seg id="{index}">{text}</seg>\n' for index, text in enumerate(sentences, start=1))
    return SGML_HEADER + "<p>\n" + segments + "</p>\n</doc>\n</srcset>\n"


def lines_of(text: ParallelText, side: str, count: int) -> list[str]:
    return [f"{text.name} {side} sentence {index}" for index in range(count)]


def add_member(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def member_bytes(member: str, sentences: list[str]) -> bytes:
    if member.endswith(".sgm"):
        return sgml(sentences).encode("utf-8")
    data = "".join(f"{sentence}\n" for sentence in sentences).encode("utf-8")
    return gzip.compress(data, mtime=0) if member.endswith(".gz") else data


def build_mirror(
    spec: ArchiveCorpusSpec, mirror: Path, sizes: dict[str, int], overrides: dict[str, bytes] | None = None
) -> tuple[ArchiveCorpusSpec, dict[str, tuple[list[str], list[str]]]]:
    """Write archives holding every member of ``spec`` (plus a decoy), and the spec with their checksums.

    Returns the spec whose archives have the mirror files' SHA-256 (URLs, names and members unchanged) and the
    expected (source, target) sentences of each split.
    """
    mirror.mkdir(parents=True, exist_ok=True)
    members: dict[str, dict[str, bytes]] = {}
    expected: dict[str, tuple[list[str], list[str]]] = {}
    for split, texts in spec.splits.items():
        sources: list[str] = []
        targets: list[str] = []
        for text in texts:
            count = sizes.get(text.name, 3)
            source, target = lines_of(text, "source", count), lines_of(text, "target", count)
            for side, sentences in ((text.source, source), (text.target, target)):
                archive_members = members.setdefault(
                    side.archive.filename, {"decoy/README": b"not a corpus\n"}
                )
                archive_members[side.member] = (overrides or {}).get(
                    side.member, member_bytes(side.member, sentences)
                )
            sources += source
            targets += target
        expected[split] = (sources, targets)
    replacements = {}
    for filename, contents in members.items():
        path = mirror / filename
        mode = "w:" if filename.endswith(".tar") else "w:gz"
        with tarfile.open(path, mode) as archive:
            for name, data in contents.items():
                add_member(archive, name, data)
        original = next(remote for remote in spec.archives if remote.filename == filename)
        replacements[filename] = dataclasses.replace(
            original, sha256=file_digest(path, "sha256"), md5=None, size=path.stat().st_size
        )
    return with_archives(spec, replacements), expected


def with_archives(spec: ArchiveCorpusSpec, replacements: dict[str, RemoteFile]) -> ArchiveCorpusSpec:
    def side(text: ArchiveText) -> ArchiveText:
        return dataclasses.replace(text, archive=replacements[text.archive.filename])

    splits = {
        split: tuple(
            dataclasses.replace(text, source=side(text.source), target=side(text.target)) for text in texts
        )
        for split, texts in spec.splits.items()
    }
    return dataclasses.replace(spec, splits=splits)


@pytest.fixture
def en_de_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, dict]:
    spec, expected = build_mirror(WMT14_EN_DE, tmp_path / "mirror", {"europarl-v7": 5, "commoncrawl": 4})
    monkeypatch.setitem(KNOWN_CORPORA, spec.name, spec)
    return tmp_path / "mirror", expected


def read_split(files: dict[str, tuple[Path, Path]], split: str) -> tuple[list[str], list[str]]:
    pairs = read_parallel_files(*files[split])
    return [source for source, _ in pairs], [target for _, target in pairs]


def test_fetch_from_a_local_mirror_extracts_every_split(
    tmp_path: Path, en_de_mirror: tuple[Path, dict]
) -> None:
    mirror, expected = en_de_mirror
    cache = tmp_path / "cache"
    notes: list[str] = []
    files = fetch_corpus("wmt14-en-de", cache, mirror=str(mirror), message=notes.append)
    corpus_dir = cache / "wmt14-en-de"
    assert files == {
        split: (corpus_dir / f"{split}.en", corpus_dir / f"{split}.de")
        for split in ("train", "valid", "test")
    }
    for split in files:
        assert read_split(files, split) == expected[split]
    # Training text is the parts in the registered order: Europarl, Common Crawl, News Commentary.
    assert read_split(files, "train")[0][:6] == [f"europarl-v7 source sentence {i}" for i in range(5)] + [
        "commoncrawl source sentence 0"
    ]
    manifest = json.loads((corpus_dir / MANIFEST_FILE).read_text())
    assert manifest["files"]["train.de"] == {
        "bytes": (corpus_dir / "train.de").stat().st_size,
        "lines": 12,
        "invalid_utf8_lines": 0,
    }
    assert sorted(path.name for path in corpus_dir.iterdir()) == sorted(
        [MANIFEST_FILE] + [f"{split}.{lang}" for split in ("train", "valid", "test") for lang in ("en", "de")]
    )  # no temporary file left
    assert sorted(path.name for path in (cache / ARCHIVE_DIRECTORY).iterdir()) == sorted(
        remote.filename for remote in KNOWN_CORPORA["wmt14-en-de"].archives
    )
    assert "wmt14-en-de: train has 12 pairs" in notes


def test_a_second_fetch_reads_nothing(tmp_path: Path, en_de_mirror: tuple[Path, dict]) -> None:
    mirror, _ = en_de_mirror
    cache = tmp_path / "cache"
    first = fetch_corpus("wmt14-en-de", cache, mirror=str(mirror))
    stamps = {path: path.stat().st_mtime_ns for pair in first.values() for path in pair}
    for archive in (cache / ARCHIVE_DIRECTORY).iterdir():
        archive.unlink()  # reuse must not even open the archives

    def refuse(url: str, destination: object) -> None:
        raise AssertionError(f"downloaded {url} although the corpus is extracted")

    second = fetch_corpus("wmt14-en-de", cache, downloader=refuse)
    assert second == first
    assert {path: path.stat().st_mtime_ns for pair in second.values() for path in pair} == stamps


def test_a_changed_or_damaged_extraction_is_redone(tmp_path: Path, en_de_mirror: tuple[Path, dict]) -> None:
    mirror, expected = en_de_mirror
    cache = tmp_path / "cache"
    files = fetch_corpus("wmt14-en-de", cache, mirror=str(mirror))
    with files["train"][1].open("a") as handle:
        handle.write("appended by hand\n")  # size no longer matches the manifest
    files = fetch_corpus("wmt14-en-de", cache, mirror=str(mirror))
    assert read_split(files, "train") == expected["train"]
    manifest_path = cache / "wmt14-en-de" / MANIFEST_FILE
    manifest = json.loads(manifest_path.read_text())
    manifest["fingerprint"] = "0" * 64  # extracted by another specification or extraction version
    manifest_path.write_text(json.dumps(manifest))
    mtime = files["valid"][0].stat().st_mtime_ns
    fetch_corpus("wmt14-en-de", cache, mirror=str(mirror))
    assert files["valid"][0].stat().st_mtime_ns != mtime
    assert json.loads(manifest_path.read_text())["fingerprint"] == KNOWN_CORPORA["wmt14-en-de"].fingerprint()


def test_the_reverse_direction_swaps_the_files_and_other_languages_are_refused(
    tmp_path: Path, en_de_mirror: tuple[Path, dict]
) -> None:
    mirror, _ = en_de_mirror
    cache = tmp_path / "cache"
    forward = fetch_corpus("wmt14-en-de", cache, mirror=str(mirror))
    reverse = fetch_corpus("wmt14-en-de", cache, mirror=str(mirror), source_lang="de", target_lang="en")
    assert reverse == {split: (target, source) for split, (source, target) in forward.items()}
    with pytest.raises(
        ValueError, match=r"data.corpus=wmt14-en-de is en-de, but data.source_lang=en and data.target_lang=fr"
    ):
        fetch_corpus("wmt14-en-de", cache, mirror=str(mirror), source_lang="en", target_lang="fr")


def test_english_french_reads_gzipped_members_of_a_plain_tar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, expected = build_mirror(WMT14_EN_FR, tmp_path / "mirror", {"giga-fren": 6, "un": 2})
    monkeypatch.setitem(KNOWN_CORPORA, spec.name, spec)
    files = fetch_corpus("wmt14-en-fr", tmp_path / "cache", mirror=str(tmp_path / "mirror"))
    assert read_split(files, "train") == expected["train"]
    assert read_split(files, "train")[1][-6:] == [f"giga-fren target sentence {i}" for i in range(6)]
    assert read_split(files, "test") == expected["test"]


def test_a_corrupt_archive_is_refused_and_nothing_is_extracted(
    tmp_path: Path, en_de_mirror: tuple[Path, dict]
) -> None:
    mirror, _ = en_de_mirror
    damaged = bytearray((mirror / "training-parallel-commoncrawl.tgz").read_bytes())
    damaged[len(damaged) // 2] ^= 0xFF
    (mirror / "training-parallel-commoncrawl.tgz").write_bytes(bytes(damaged))
    cache = tmp_path / "cache"
    with pytest.raises(
        ChecksumMismatchError,
        match=r"training-parallel-commoncrawl\.tgz from .* has sha256 [0-9a-f]{64}, expected",
    ):
        fetch_corpus("wmt14-en-de", cache, mirror=str(mirror))
    assert not (cache / "wmt14-en-de").exists()
    assert sorted(path.name for path in (cache / ARCHIVE_DIRECTORY).iterdir()) == [
        "training-parallel-europarl-v7.tgz"
    ]


def test_misaligned_members_are_refused_naming_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    member = "commoncrawl.de-en.de"
    spec, _ = build_mirror(WMT14_EN_DE, tmp_path / "mirror", {}, overrides={member: b"one\ntwo\n"})
    monkeypatch.setitem(KNOWN_CORPORA, spec.name, spec)
    cache = tmp_path / "cache"
    with pytest.raises(
        CorpusError,
        match=(
            r"wmt14-en-de train: commoncrawl has 3 lines in training-parallel-commoncrawl\.tgz:commoncrawl\.de-en\.en "
            r"but 2 in training-parallel-commoncrawl\.tgz:commoncrawl\.de-en\.de"
        ),
    ):
        fetch_corpus("wmt14-en-de", cache, mirror=str(tmp_path / "mirror"))
    assert sorted(path.name for path in (cache / "wmt14-en-de").iterdir()) == []  # no split file, no manifest


def test_an_interrupted_extraction_leaves_no_manifest_and_is_redone(
    tmp_path: Path, en_de_mirror: tuple[Path, dict], monkeypatch: pytest.MonkeyPatch
) -> None:
    mirror, expected = en_de_mirror
    cache = tmp_path / "cache"
    import transformer.data.corpora.archive_corpus as archive_corpus

    real_copy = archive_corpus._copy_lines
    calls = []

    def killed_during_the_test_split(lines, destination):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) == 9:  # train (3 parts x 2 sides), valid (2), then the first side of test
            raise KeyboardInterrupt
        return real_copy(lines, destination)

    monkeypatch.setattr(archive_corpus, "_copy_lines", killed_during_the_test_split)
    with pytest.raises(KeyboardInterrupt):
        fetch_corpus("wmt14-en-de", cache, mirror=str(mirror))
    corpus_dir = cache / "wmt14-en-de"
    assert sorted(path.name for path in corpus_dir.iterdir()) == [
        "train.de",
        "train.en",
        "valid.de",
        "valid.en",
    ]
    monkeypatch.setattr(archive_corpus, "_copy_lines", real_copy)
    files = fetch_corpus("wmt14-en-de", cache, mirror=str(mirror))
    assert read_split(files, "test") == expected["test"]
    assert (corpus_dir / MANIFEST_FILE).is_file()


def test_text_members_keep_their_alignment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No split on "\\r" or Unicode separators, a BOM dropped, invalid UTF-8 replaced and counted, last line ended."""
    source = "\ufeffa first line\nline with \u2028 separator\nline with a \r inside\nno newline at the end".encode()
    target = b"erste\nzweite\ndritte \xff\xfe kaputt\nvierte"
    spec, _ = build_mirror(
        WMT14_EN_DE,
        tmp_path / "mirror",
        {},
        overrides={"training/europarl-v7.de-en.en": source, "training/europarl-v7.de-en.de": target},
    )
    monkeypatch.setitem(KNOWN_CORPORA, spec.name, spec)
    files = fetch_corpus("wmt14-en-de", tmp_path / "cache", mirror=str(tmp_path / "mirror"))
    sources, targets = read_split(files, "train")
    assert sources[:5] == [
        "a first line",
        "line with \u2028 separator",
        "line with a \r inside",
        "no newline at the end",
        "commoncrawl source sentence 0",
    ]
    assert targets[2] == "dritte \ufffd\ufffd kaputt"
    manifest = json.loads((tmp_path / "cache" / "wmt14-en-de" / MANIFEST_FILE).read_text())
    assert manifest["files"]["train.de"]["invalid_utf8_lines"] == 1
    assert manifest["files"]["train.en"]["invalid_utf8_lines"] == 0


def test_sgml_segments_equal_sacrebleus_conversion(tmp_path: Path) -> None:
    raw = (
        SGML_HEADER
        + '<p>\n<seg id="1">  Spaces   around  and\tinside </seg>\n'
        + '<seg id="2">Ampersands &amp; entities &quot;stay&quot; as written.</seg>\n'
        + "<hl>a headline line that is not a segment</hl>\n"
        + '<seg id="3" extra="x">Attributes, and text after</seg> trailing\n'
        + '<seg id="4"></seg>\n'
        + "</p>\n</doc>\n</srcset>\n"
    )
    source = tmp_path / "test.sgm"
    source.write_text(raw, encoding="utf-8")
    converted = tmp_path / "sacrebleu.txt"
    FakeSGMLDataset._convert_format(FakeSGMLDataset.__new__(FakeSGMLDataset), str(source), str(converted))
    ours = list(sgml_segments(iter(raw.splitlines(keepends=True))))
    assert ours == converted.read_text(encoding="utf-8").split("\n")[:-1]
    assert ours[0] == "Spaces around and inside" and len(ours) == 4


def test_a_training_run_reads_the_corpus_through_the_token_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec, expected = build_mirror(WMT14_EN_DE, tmp_path / "mirror", {"europarl-v7": 40, "commoncrawl": 30})
    monkeypatch.setitem(KNOWN_CORPORA, spec.name, spec)
    data = DataConfig(
        corpus="wmt14-en-de",
        cache_dir=str(tmp_path / "cache"),
        mirror=str(tmp_path / "mirror"),
        token_store=True,
    )
    prepared = prepare_data(data, vocab_size=60, run_dir=tmp_path / "run")
    assert isinstance(prepared.train, StoredCorpus) and len(prepared.train) == len(expected["train"][0]) == 73
    assert prepared.valid is not None and len(prepared.valid) == 3
    assert set(prepared.split_files) == {"train", "valid", "test"}
    first_source = prepared.tokenizer.decode(list(prepared.train.source[0]))
    assert first_source == "europarl-v7 source sentence 0"


def test_remote_files_check_the_published_size_and_md5(tmp_path: Path) -> None:
    payload = tmp_path / "payload.tgz"
    payload.write_bytes(b"x" * 100)
    md5 = file_digest(payload, "md5")
    from transformer.data.corpora.remote_files import fetch_remote_file

    wrong_size = RemoteFile("https://example.org/payload.tgz", None, "payload.tgz", md5=md5, size=99)
    with pytest.raises(ChecksumMismatchError, match=r"payload\.tgz from .* has 100 bytes, expected 99"):
        fetch_remote_file(wrong_size, tmp_path / "cache", mirror=str(tmp_path))
    right = dataclasses.replace(wrong_size, size=100)
    assert fetch_remote_file(right, tmp_path / "cache", mirror=str(tmp_path)).read_bytes() == b"x" * 100
    wrong_md5 = dataclasses.replace(right, md5="0" * 32, filename="payload.tgz")
    with pytest.raises(ChecksumMismatchError, match=rf"has md5 {md5}, expected 0{{32}}"):
        fetch_remote_file(wrong_md5, tmp_path / "other-cache", mirror=str(tmp_path))
    with pytest.raises(ValueError, match="give sha256 or md5"):
        RemoteFile("https://example.org/x", None, "x")
    with pytest.raises(ValueError, match="md5='abc' is not 32 lowercase hex digits"):
        RemoteFile("https://example.org/x", None, "x", md5="abc")
