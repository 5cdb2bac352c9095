"""The teacher's pass: slices of whole chunks, resuming after a kill, and the same lines for any process count."""

from pathlib import Path

import pytest

from transformer.config.distill import DistillConfig
from transformer.distillation.teacher_pass import (
    TeacherSlice,
    finished_lines,
    merge_parts,
    teacher_slices,
    teacher_translator,
    translate_slice,
)


@pytest.mark.parametrize(
    ("line_count", "chunk_lines", "world_size"),
    [(1000, 64, 1), (1000, 64, 2), (1000, 64, 3), (130, 64, 5), (64, 64, 2), (1, 10, 4)],
)
def test_slices_cover_every_line_once_in_order_as_runs_of_whole_chunks(
    line_count: int, chunk_lines: int, world_size: int
) -> None:
    slices = teacher_slices(line_count, chunk_lines, world_size)
    assert [piece.rank for piece in slices] == list(range(world_size))
    covered = [line for piece in slices for line in range(piece.start, piece.stop)]
    assert covered == list(range(line_count))
    for piece in slices:
        assert piece.start % chunk_lines == 0 or piece.start == line_count
        assert piece.part_name == f"part-{piece.rank:05d}-of-{world_size:05d}.txt"
    chunks = [piece.line_count // chunk_lines for piece in slices if piece.stop < line_count]
    assert max(chunks, default=0) - min(chunks, default=0) <= 1  # shared out evenly


def test_a_torn_chunk_is_cut_back_to_the_last_whole_chunk(tmp_path: Path) -> None:
    piece = TeacherSlice(rank=1, world_size=2, start=8, stop=18, chunk_lines=4)
    part = tmp_path / piece.part_name
    assert finished_lines(part, piece) == 0
    part.write_bytes(b"a\nb\nc\nd\ne\nf\ng\nh\ni\nhalf a li")  # two whole chunks, then a kill mid-chunk
    assert finished_lines(part, piece) == 8
    assert part.read_bytes() == b"a\nb\nc\nd\ne\nf\ng\nh\n"
    part.write_bytes(b"".join(b"%d\n" % index for index in range(10)))  # the last chunk is short: complete
    assert finished_lines(part, piece) == 10
    part.write_bytes(b"x\n" * 11)
    with pytest.raises(
        ValueError, match=rf"{part.name}: 11 lines, more than the 10 source lines of its slice"
    ):
        finished_lines(part, piece)


@pytest.fixture(scope="module")
def teacher(teacher_run: Path):
    """The tiny teacher's translator with a two-hypothesis beam, and 150 training sources."""
    from transformer.data.pipeline.text_files import read_lines

    translator = teacher_translator([teacher_run], DistillConfig(teacher_beam_size=2), "cpu")
    return translator, read_lines(teacher_run / "data" / "train.en")[:150]


def test_one_and_three_processes_write_the_same_lines(teacher, tmp_path: Path) -> None:
    translator, sources = teacher
    one = teacher_slices(len(sources), 32, 1)
    assert translate_slice(translator, sources, one[0], tmp_path / "one" / one[0].part_name) == len(sources)
    three = teacher_slices(len(sources), 32, 3)
    for piece in three:
        translate_slice(translator, sources, piece, tmp_path / "three" / piece.part_name)
    merged = merge_parts(tmp_path / "one", one)
    assert merge_parts(tmp_path / "three", three) == merged
    assert len(merged) == len(sources) and merged == translator.translate(sources[:32]) + merged[32:]


def test_a_killed_slice_resumes_after_its_last_whole_chunk(teacher, tmp_path: Path) -> None:
    translator, sources = teacher
    [piece] = teacher_slices(len(sources), 40, 1)
    reference = tmp_path / "reference.txt"
    translate_slice(translator, sources, piece, reference)
    part = tmp_path / piece.part_name
    whole = reference.read_bytes()
    first_chunk_end = [index for index, byte in enumerate(whole) if byte == ord("\n")][39] + 1
    part.write_bytes(whole[: first_chunk_end + 7])  # one chunk and a torn start of the next
    seen: list[int] = []
    assert translate_slice(translator, sources, piece, part, seen.append) == len(sources) - 40
    assert seen == [40, 40, 40, 30] and part.read_bytes() == whole
    assert translate_slice(translator, sources, piece, part) == 0  # complete: nothing translated again


def test_a_missing_or_short_part_is_named_when_merging(tmp_path: Path) -> None:
    slices = teacher_slices(10, 4, 2)  # three chunks: lines 1-4 for rank 0, 5-10 for rank 1
    (tmp_path / slices[0].part_name).write_text("a\nb\nc\nd\n", encoding="utf-8")
    with pytest.raises(
        ValueError, match=r"part-00001-of-00002.txt: missing, expected 6 \(source lines 5-10\)"
    ):
        merge_parts(tmp_path, slices)
    (tmp_path / slices[1].part_name).write_text("e\nf\ng\nh\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"part-00001-of-00002.txt: 4 lines, expected 6"):
        merge_parts(tmp_path, slices)
    (tmp_path / slices[1].part_name).write_text("e\nf\ng\nh\ni\nj\n", encoding="utf-8")
    assert merge_parts(tmp_path, slices) == list("abcdefghij")


def test_the_teacher_search_is_its_runs_beam_one_output_without_sampling(teacher) -> None:
    translator, _ = teacher
    search = translator.decode_config
    assert (search.beam_size, search.nbest, search.sampling, search.mbr) == (2, 1, False, 0)
    with pytest.raises(ValueError, match="one line per source, got nbest=2"):
        translator.decode_config = search.__class__(beam_size=2, nbest=2)
        translate_slice(translator, ["a"], TeacherSlice(0, 1, 0, 1, 1), Path("/nonexistent/part"))
    translator.decode_config = search
