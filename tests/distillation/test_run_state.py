"""The distill record: a new run, the same run resumed, another run refused naming what differs."""

import gzip
import json
from pathlib import Path

import pytest

from transformer.data.pipeline.text_files import read_lines
from transformer.distillation.distilled_corpus import write_distilled_corpus
from transformer.distillation.run_state import (
    STATE_FILE,
    check_distill_output,
    first_difference,
    open_distill_state,
    read_distill_state,
)

IDENTITY = {"teachers": [{"path": "/t", "weights_sha256": "ab"}], "student": {"model": {"d_model": 64}}}


def test_a_run_is_resumed_with_its_stages_and_refused_with_another_identity(tmp_path: Path) -> None:
    run = tmp_path / "run"
    state = open_distill_state(run, IDENTITY)
    assert json.loads((run / STATE_FILE).read_text()) == {"identity": IDENTITY, "stages": {}}
    state.finish("teacher", {"seconds": 3.0})
    state.finish("corpus", {"seconds": 1.0})
    resumed = open_distill_state(run, IDENTITY)
    assert resumed.finished("teacher") == {"seconds": 3.0} and resumed.finished("student") is None
    other = {**IDENTITY, "student": {"model": {"d_model": 128}}}
    with pytest.raises(ValueError, match=r"another student.model.d_model \(was 64, now 128\)"):
        open_distill_state(run, other)
    # A stage that runs again forgets the stages made from what it replaced.
    resumed.finish("teacher", {"seconds": 4.0})
    assert read_distill_state(run, "--x").stages == {"teacher": {"seconds": 4.0}}


def test_judging_stages_rerun_when_their_settings_change(tmp_path: Path) -> None:
    state = open_distill_state(tmp_path / "run", IDENTITY)
    state.finish("evaluation", {"seconds": 1.0, "settings": {"student_beam_size": 1}})
    assert state.finished("evaluation", {"student_beam_size": 1}) is not None
    assert state.finished("evaluation", {"student_beam_size": 2}) is None


def test_a_folder_that_is_not_a_distill_run_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    check_distill_output(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    check_distill_output(tmp_path / "empty")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "thesis.tex").write_text("precious")
    with pytest.raises(ValueError, match=r"--output-dir .*mine: exists and holds no distill.json"):
        check_distill_output(tmp_path / "mine")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match=r"--output-dir .*file: is a file"):
        check_distill_output(tmp_path / "file")
    with pytest.raises(ValueError, match=r"--reuse-teacher-pass .*mine: no readable distill.json"):
        read_distill_state(tmp_path / "mine", "--reuse-teacher-pass")
    assert (tmp_path / "mine" / "thesis.tex").read_text() == "precious"


def test_first_difference_names_the_key_path() -> None:
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 2}]}) is None
    assert first_difference({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}]}) == "a[1].b (was 2, now 3)"
    assert first_difference({"a": 1}, {"a": 1, "c": None}) is None  # a setting added later, at its default
    assert first_difference({"a": [1]}, {"a": [1, 2]}) == "a (was [1], now [1, 2])"


def test_the_distilled_corpus_pairs_sources_with_translations_and_copies_the_real_splits(
    tmp_path: Path,
) -> None:
    original = tmp_path / "original"
    original.mkdir()
    (original / "train.en").write_text("a dog\n\na cat\nthe sun\n", encoding="utf-8")
    (original / "train.de").write_text("ein Hund\nleer\neine Katze\ndie Sonne\n", encoding="utf-8")
    with gzip.open(original / "valid.en.gz", "wt", encoding="utf-8") as handle:
        handle.write("a bird\n")
    (original / "valid.de").write_text("ein Vogel\n", encoding="utf-8")
    files = {
        "train": (original / "train.en", original / "train.de"),
        "valid": (original / "valid.en.gz", original / "valid.de"),
    }
    translations = ["Hund", "", "Katze", ""]  # the teacher gave nothing for the sun
    corpus = write_distilled_corpus(
        tmp_path / "corpus", files, translations, ("en", "de"), mix_original=False
    )
    assert (corpus.teacher_pairs, corpus.original_pairs, corpus.dropped) == (2, 0, 2)
    assert read_lines(tmp_path / "corpus" / "train.en") == ["a dog", "a cat"]
    assert read_lines(tmp_path / "corpus" / "train.de") == ["Hund", "Katze"]
    assert (tmp_path / "corpus" / "valid.en.gz").read_bytes() == (original / "valid.en.gz").read_bytes()
    assert (tmp_path / "corpus" / "valid.de").read_bytes() == (original / "valid.de").read_bytes()
    mixed = write_distilled_corpus(tmp_path / "corpus", files, translations, ("en", "de"), mix_original=True)
    assert (mixed.teacher_pairs, mixed.original_pairs) == (2, 3)
    assert read_lines(tmp_path / "corpus" / "train.de") == [
        "Hund",
        "Katze",
        "ein Hund",
        "eine Katze",
        "die Sonne",
    ]
    with pytest.raises(ValueError, match=r"train.en: 4 training sources, but the teacher's pass holds 3"):
        write_distilled_corpus(tmp_path / "corpus", files, translations[:3], ("en", "de"), mix_original=False)
    assert read_lines(tmp_path / "corpus" / "train.de")[0] == "Hund"  # the failed write left the old corpus
