"""The shortlist builder and its file: counts by hand, atomic writes, and one-line refusals."""

import os
import stat
from pathlib import Path

import pytest
import torch

from transformer.data.shortlist import (
    Shortlist,
    ShortlistError,
    build_shortlist,
    check_shortlist_destination,
    load_shortlist,
    save_shortlist,
)

# Source piece 5 occurs with target 10 in three pairs, with 11 in two, with 12 in one; 6 only with 12 and 13.
PAIRS = [
    ([5, 2], [10, 11, 2]),
    ([5, 5, 2], [10, 11, 11, 2]),
    ([5, 6, 2], [10, 12, 13, 2]),
    ([7, 2], [14, 14, 14, 14, 2]),
]


def build(per_source: int = 2, frequent: int = 1) -> Shortlist:
    return build_shortlist(PAIRS, 20, 20, [0, 1, 2, 3], "abc", per_source, frequent)


def test_candidates_are_ranked_by_co_occurring_pairs_outside_the_frequent_set() -> None:
    # Token 14 is the most frequent target (4 tokens, though in one pair): it is in every sentence's set.
    shortlist = build(per_source=2, frequent=1)
    assert shortlist.always.tolist() == [0, 1, 2, 3, 14]

    def candidates(source: int) -> list[int]:
        start, end = int(shortlist.offsets[source]), int(shortlist.offsets[source + 1])
        return shortlist.candidates[start:end].tolist()

    assert candidates(5) == [10, 11]  # 3 pairs, 2 pairs; 12 (1 pair) is cut by per_source=2
    assert candidates(6) == [10, 12]  # one pair each: ties go to the lower id
    assert candidates(7) == []  # its only partner, 14, is frequent; EOS (2) is special
    assert candidates(4) == []
    assert shortlist.sentence_tokens([5, 6, 2, 0]).tolist() == [0, 1, 2, 3, 10, 11, 12, 14]


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    shortlist = build()
    path = tmp_path / "shortlist.safetensors"
    save_shortlist(shortlist, path)
    loaded = load_shortlist(path, "abc")
    assert loaded.vocabulary == "abc" and loaded.tgt_vocab_size == 20
    assert torch.equal(loaded.offsets, shortlist.offsets)
    assert torch.equal(loaded.candidates, shortlist.candidates)
    assert torch.equal(loaded.always, shortlist.always)
    save_shortlist(build(per_source=1), path)  # its own file is replaced
    assert load_shortlist(path).candidates.numel() < shortlist.candidates.numel()
    assert [entry.name for entry in tmp_path.iterdir()] == ["shortlist.safetensors"]  # no temporary left


def test_another_vocabulary_is_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "shortlist.safetensors"
    save_shortlist(build(), path)
    with pytest.raises(
        ShortlistError, match=r"shortlist.safetensors: built for vocabulary abc, the checkpoint's is xyz"
    ):
        load_shortlist(path, "xyz")


def test_a_file_it_did_not_write_is_never_replaced(tmp_path: Path) -> None:
    path = tmp_path / "notes.safetensors"
    path.write_text("my notes", encoding="utf-8")
    with pytest.raises(ShortlistError, match=r"notes.safetensors: exists and is not a shortlist file"):
        save_shortlist(build(), path)
    assert path.read_text(encoding="utf-8") == "my notes"


def test_a_fifo_as_destination_is_refused_unread(tmp_path: Path) -> None:
    # Reading its header to see whether it is a shortlist blocked on a FIFO with no writer.
    fifo = tmp_path / "out.safetensors"
    os.mkfifo(fifo)
    with pytest.raises(ShortlistError, match=r"out.safetensors: exists and is not a shortlist file"):
        check_shortlist_destination(fifo)
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


@pytest.mark.parametrize(
    ("contents", "message"),
    [
        (None, r"no such shortlist file"),
        (b"\x05\x00\x00\x00\x00\x00\x00\x00{}", r"not a readable shortlist file"),
        (b"garbage", r"not a readable shortlist file"),
    ],
)
def test_missing_or_damaged_files_are_one_line(tmp_path: Path, contents: bytes | None, message: str) -> None:
    path = tmp_path / "shortlist.safetensors"
    if contents is not None:
        path.write_bytes(contents)
    with pytest.raises(ShortlistError, match=message) as caught:
        load_shortlist(path)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_ids_out_of_range_in_a_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "shortlist.safetensors"
    shortlist = build()
    damaged = Shortlist("abc", 20, shortlist.offsets, shortlist.candidates + 100, shortlist.always)
    save_shortlist(damaged, path)
    with pytest.raises(ShortlistError, match=r"damaged shortlist \(offsets or ids out of range\)"):
        load_shortlist(path)


def test_bad_options_and_ids_are_refused() -> None:
    with pytest.raises(ValueError, match="per_source and frequent must be at least 0"):
        build_shortlist(PAIRS, 20, 20, [2], "abc", -1, 5)
    with pytest.raises(ValueError, match=r"outside the target vocabulary \[0, 12\)"):
        build_shortlist(PAIRS, 20, 12, [2], "abc", 2, 1)
    with pytest.raises(ValueError, match="no sentence pairs"):
        build_shortlist([], 20, 20, [2], "abc", 2, 1)
