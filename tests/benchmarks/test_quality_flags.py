"""The flags' test (built, written and read back), the detection figures, and a run of the benchmark."""

import gzip
from pathlib import Path

import pytest

from benchmarks.quality_flags import detection, main
from benchmarks.quality_flags_cases import CASE_KINDS, build_test, read_test, write_test
from transformer.data.pipeline.text_files import CorpusError
from transformer.decoding.quality_flags import repetition_span

SOURCES = [f"source sentence number {n} ." for n in range(6)]
REFERENCES = [
    "Ein Mann fährt Fahrrad auf der Straße.",
    "Zwei Hunde spielen im Schnee.",
    "Kurz.",
    "Eine Frau liest ein Buch im Park.",
    "Kinder spielen Fußball auf einer Wiese.",
    "Ein alter Mann sitzt auf einer Bank.",
]


def test_every_long_enough_sentence_gets_each_kind_of_case_with_its_fault() -> None:
    cases = build_test(SOURCES, REFERENCES)
    assert cases == build_test(SOURCES, REFERENCES)  # seeded
    assert sorted({case.index for case in cases}) == [0, 1, 3, 4, 5]  # "Kurz." has under four words
    halves = {case.index: case.half for case in cases}
    assert sorted(halves.values()).count("a") in (2, 3)  # a seeded shuffle: half of the six sentences each
    for index in (0, 1, 3, 4, 5):
        mine = {case.kind: case for case in cases if case.index == index}
        assert list(mine) == list(CASE_KINDS)
        assert len({case.half for case in mine.values()}) == 1  # a sentence's cases share a half
        assert mine["real"].target == "" and mine["reference"].target == REFERENCES[index]
        reference_words = REFERENCES[index].split()
        omitted = mine["omission"].target.split()
        assert 1 <= len(omitted) <= len(reference_words) - 2 and mine["omission"].target.endswith(".")
        assert REFERENCES[index].startswith(mine["omission"].target.rstrip("."))
        assert mine["hallucination"].target == REFERENCES[(index + 3) % 6]
        start, end, added = repetition_span(mine["repetition"].target.split())
        assert added >= 2 and len(mine["repetition"].target.split()) == len(reference_words) + added
        assert 1 <= (end - start) - added <= 3  # the first copy: one to three words
        assert all(case.source == SOURCES[index] for case in mine.values())


def test_a_test_reads_back_as_written_and_a_bad_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "test.tsv.gz"
    cases = build_test(SOURCES, REFERENCES)
    write_test(path, cases)
    first = path.read_bytes()
    assert read_test(path) == cases
    write_test(path, cases)
    assert path.read_bytes() == first  # no time in the gzip header
    lines = gzip.decompress(first).decode("utf-8").splitlines()
    path.write_bytes(gzip.compress("\n".join([*lines[:3], "a\t0\tmistake\tx\ty", *lines[3:]]).encode()))
    with pytest.raises(CorpusError, match=r"test\.tsv\.gz: line 4: expected 5 fields"):
        read_test(path)
    path.write_bytes(gzip.compress(b"half\tindex\n"))
    with pytest.raises(CorpusError, match="line 1: expected the header"):
        read_test(path)
    path.write_bytes(b"not gzip")
    with pytest.raises(CorpusError, match="cannot read"):
        read_test(path)


def test_detection_counts_precision_recall_and_f1() -> None:
    fires = [True, True, False, True, False]
    truth = [True, False, False, True, True]
    found = detection(fires, truth)
    assert (found.precision, found.recall, found.positives) == (pytest.approx(2 / 3), pytest.approx(2 / 3), 3)
    assert found.f1 == pytest.approx(2 / 3)
    assert detection([False] * 3, [True, False, True]).recall == 0.0
    assert detection([False] * 3, [True, False, True]).f1 == 0.0
    assert detection([False] * 3, [True, False, True]).precision == 1.0


def test_a_run_on_the_tiny_model_writes_its_record(trained_run: Path, tmp_path: Path, capsys) -> None:
    data = trained_run / "data"
    test = tmp_path / "flags.tsv.gz"
    main(["--build-test", "--source", str(data / "valid.en"), "--reference", str(data / "valid.de"),
          "--test", str(test)])  # fmt: skip
    cases = read_test(test)
    assert {case.kind for case in cases} == set(CASE_KINDS)
    output = tmp_path / "flags.md"
    main(["--checkpoint", str(trained_run), "--test", str(test), "--beam", "2", "--output", str(output)])
    record = output.read_text(encoding="utf-8")
    assert "CPU: " in record and "real outputs by beam 2" in record and "chosen: FlagThresholds(" in record
    for kind in (
        "| omission |",
        "| hallucination |",
        "| repetition |",
        "| hallucination by probability alone |",
    ):
        assert kind in record
    # The table of how often each flag fires: a row per kind of case, a share per flag and the alternative.
    firing = record.split("How often each flag fires")[1].splitlines()
    for kind in CASE_KINDS:
        [row] = [line for line in firing if line.startswith(f"| {kind} | ")]
        assert row.count("%") == 4
    with pytest.raises(SystemExit, match=r"python -m benchmarks\.quality_flags: .*missing"):
        main(["--checkpoint", str(tmp_path / "missing"), "--test", str(test), "--output", str(output)])
    with pytest.raises(SystemExit):
        main(["--test", str(test)])
    assert "--checkpoint is required" in capsys.readouterr().err
