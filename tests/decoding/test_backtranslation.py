"""Back-translation: one command writes a synthetic corpus that ``train`` reads with a tag and up-sampling."""

import json
from pathlib import Path

from tests.conftest import write_tiny_config
from transformer.cli import main
from transformer.config.decode import DecodeConfig
from transformer.data.corpora.backtranslated_corpus import (
    read_backtranslated_pairs,
    write_backtranslated_corpus,
)
from transformer.data.pipeline.text_files import read_lines
from transformer.data.pipeline.tokenizer import Tokenizer
from transformer.decoding.backtranslation import backtranslation_settings


def test_backtranslate_writes_a_corpus_that_train_reads_tagged_and_upsampled(
    trained_run: Path, tmp_path: Path, capsys
) -> None:
    monolingual = trained_run / "data" / "valid.de"
    corpus = tmp_path / "bt"
    # --min-length 1: the tiny model may sample EOS first, and an empty source is dropped from the corpus.
    arguments = [
        "backtranslate",
        "--checkpoint",
        str(trained_run),
        "--input",
        str(monolingual),
        "--min-length",
        "1",
    ]
    assert main([*arguments, "--output", str(corpus), "--seed", "3"]) == 0
    assert "wrote 30 synthetic pairs (0 dropped: empty)" in capsys.readouterr().out
    targets = read_lines(corpus / "train.de")
    assert targets == read_lines(monolingual)
    sources = read_lines(corpus / "train.en")
    record = json.loads((corpus / "backtranslation.json").read_text(encoding="utf-8"))
    assert (
        record["search"]["sampling"] is True and record["pairs"] == 30 and record["input"] == str(monolingual)
    )
    # The same seed writes the same corpus again (the folder is an earlier back-translation: replaced).
    assert main([*arguments, "--output", str(corpus), "--seed", "3"]) == 0
    assert read_lines(corpus / "train.en") == sources
    # Beam search instead of sampling.
    assert main([*arguments, "--output", str(tmp_path / "beam"), "--beam", "2"]) == 0
    assert json.loads((tmp_path / "beam" / "backtranslation.json").read_text())["search"]["beam_size"] == 2

    config = write_tiny_config(
        tmp_path,
        data={"backtranslated_dir": str(corpus), "backtranslation_tag": "<BT>", "real_upsample": 2},
        train={"max_steps": 2},
    )
    capsys.readouterr()
    assert main(["train", "--config", str(config), "--output-dir", str(tmp_path / "run")]) == 0
    log = capsys.readouterr()
    assert "train: + 30 back-translated pairs from" in log.out + log.err
    assert "real pairs x2" in log.out + log.err
    tokenizer = Tokenizer.load(tmp_path / "run" / "tokenizer.model")
    assert tokenizer.pieces("<BT> Ein Hund")[:2] == ["▁", "<BT>"]


def test_synthetic_pairs_with_an_empty_side_are_dropped_and_tags_added(tmp_path: Path) -> None:
    written = write_backtranslated_corpus(
        tmp_path / "bt", ["A dog.", "", "A cat."], ["Ein Hund.", "Leer.", ""], ("en", "de"), {"input": "x"}
    )
    assert written == 1
    assert read_backtranslated_pairs(tmp_path / "bt", ("en", "de"), "<BT>") == [("<BT> A dog.", "Ein Hund.")]
    assert json.loads((tmp_path / "bt" / "backtranslation.json").read_text())["dropped"] == 2


def test_backtranslation_settings_sample_unless_a_beam_is_given() -> None:
    base = DecodeConfig(beam_size=4, nbest=2, max_length_offset=7)
    sampled = backtranslation_settings(base, None)
    assert sampled.sampling and sampled.nbest == 1 and sampled.max_length_offset == 7
    beam = backtranslation_settings(base, 5)
    assert not beam.sampling and beam.beam_size == 5 and beam.nbest == 1
