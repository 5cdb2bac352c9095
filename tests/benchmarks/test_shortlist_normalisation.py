"""The shortlist-normalisation benchmark: each projection's arithmetic, and a run on the tiny model."""

import shutil
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from benchmarks.shortlist_normalisation import (
    NormalisedProjection,
    main,
    measure_normalisations,
)
from transformer.checkpoint.model_checkpoint import load_checkpoint
from transformer.data.pipeline.text_files import read_parallel_files
from transformer.decoding.checkpoint_shortlist import build_checkpoint_shortlist
from transformer.decoding.shortlist import RestrictedProjection
from transformer.model.transformer import Transformer


@pytest.fixture(scope="module")
def shortlisted_run(trained_run: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("normalisation") / "run"
    shutil.copytree(trained_run, run)
    build_checkpoint_shortlist(run, per_source=5, frequent=10)  # small: the ways of normalising differ
    return run


def test_each_projection_normalises_over_its_set(trained_run: Path) -> None:
    model = load_checkpoint(trained_run).build_model().eval()
    assert isinstance(model, Transformer)
    torch.manual_seed(0)
    hidden = torch.randn(3, model.config.d_model)
    first, second = torch.tensor([2, 5, 9, 20]), torch.tensor([2, 7, 9])
    union = torch.tensor([2, 5, 7, 9, 20])
    row_sentences = torch.tensor([0, 1, 1])
    with torch.inference_mode():
        logits = model.project_output(hidden[:, None])[:, 0]  # (rows, vocab)
        full = F.log_softmax(logits, dim=-1)
        sentence = NormalisedProjection(model, [first, second], "sentence")
        vocabulary = NormalisedProjection(model, [first, second], "vocabulary")
        batch_union = NormalisedProjection(model, [first, second], "union")
        expected_sentence = RestrictedProjection(model, [first, second]).column_log_probs(
            hidden, row_sentences
        )
        torch.testing.assert_close(sentence.column_log_probs(hidden, row_sentences), expected_sentence)
        by_vocabulary = vocabulary.column_log_probs(hidden, row_sentences)  # (rows, union)
        by_union = batch_union.column_log_probs(hidden, row_sentences)
    for row, allowed in enumerate([first, second, second]):
        columns = torch.searchsorted(union, allowed)
        torch.testing.assert_close(by_vocabulary[row, columns], full[row, allowed])  # the full model's values
        outside = torch.ones(union.numel(), dtype=torch.bool)
        outside[columns] = False
        assert bool(by_vocabulary[row, outside].isneginf().all())
        # The union: every row over all five pieces, whichever sentence it belongs to.
        torch.testing.assert_close(by_union[row], F.log_softmax(logits[row, union], dim=-1))
    assert float(torch.logsumexp(by_vocabulary[0], dim=0)) < -1e-3  # the left-out mass is missing
    with pytest.raises(ValueError, match="normalisation must be one of"):
        NormalisedProjection(model, [first], "batch")


def test_a_run_scores_every_way_and_greedy_ignores_the_normaliser(shortlisted_run: Path) -> None:
    data = shortlisted_run / "data"
    pairs = read_parallel_files(data / "valid.en", data / "valid.de")[:24]
    sources, references = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    greedy = measure_normalisations(shortlisted_run, sources, references, 1, batch_size=8, resamples=100)
    assert [row.name for row in greedy] == ["full", "sentence", "vocabulary", "union"]
    names = {row.name: row for row in greedy}
    # Greedy picks the best piece of its own set at each step: the normaliser cannot change it.
    assert names["vocabulary"].translations == names["sentence"].translations
    assert names["full"].changed == 0 and names["full"].p_value is None
    assert all(0 <= row.bleu <= 100 for row in greedy)
    assert all(row.p_value is not None and 0 < row.p_value <= 1 for row in greedy[1:])


def test_the_command_writes_its_record_and_names_a_missing_checkpoint(
    shortlisted_run: Path, tmp_path: Path, capsys
) -> None:
    output = tmp_path / "normalisation.md"
    data = shortlisted_run / "data"
    main(["--checkpoint", str(shortlisted_run), "--source", str(data / "valid.en"), "--reference",
          str(data / "valid.de"), "--beams", "1", "2", "--limit", "12", "--batch-size", "4",
          "--resamples", "100", "--output", str(output)])  # fmt: skip
    record = output.read_text(encoding="utf-8")
    assert "CPU: " in record and "12 sentences" in record and "batches of 4" in record
    assert record.count("| greedy |") == 4 and record.count("| beam 2 |") == 4
    with pytest.raises(SystemExit, match=r"python -m benchmarks\.shortlist_normalisation: .*missing"):
        main(["--checkpoint", str(tmp_path / "missing"), "--output", str(output)])
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(shortlisted_run), "--resamples", "10"])
    assert "--resamples must be at least 100" in capsys.readouterr().err
