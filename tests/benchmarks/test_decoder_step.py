"""The per-step reductions' A/B (benchmarks/decoder_step.py): every row runs, both variants agree."""

from pathlib import Path

import pytest

from benchmarks import decoder_step
from transformer.decoding import beam_search, greedy, top_tokens


def test_decoder_step_prints_every_row_and_restores_the_searches(
    trained_run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (top_tokens.MIN_BLOCKED_ELEMENTS, greedy.note_nan_scores, beam_search.note_nan_scores)
    source = trained_run / "data" / "valid.en"
    decoder_step.main(["--checkpoint", str(trained_run), "--source", str(source), "--sentences", "4",
                       "--single", "2", "--rounds", "2", "--threads", "1"])  # fmt: skip
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| fp32") or
            line.startswith("| int8")]  # fmt: skip
    assert len(rows) == 8  # {fp32, int8} x {greedy, beam 4} x {batch 32, batch 1}
    assert all(row.endswith("| yes |") for row in rows)
    assert (top_tokens.MIN_BLOCKED_ELEMENTS, greedy.note_nan_scores, beam_search.note_nan_scores) == before


def test_the_plain_variant_runs_the_old_reductions() -> None:
    with decoder_step.variant("plain"):
        assert greedy.note_nan_scores is decoder_step.plain_note_nan_scores
        assert top_tokens.MIN_BLOCKED_ELEMENTS > 10**15
    assert greedy.note_nan_scores is not decoder_step.plain_note_nan_scores
