"""The glossary benchmark's pieces (links, term checks) and a run of it on the tiny model."""

import gzip
import importlib.util
from pathlib import Path

import pytest

from benchmarks.glossary import build_glossary_test, main, one_to_one_links, term_use, term_used, words
from transformer.decoding.glossary import Glossary


def test_links_are_kept_where_both_directions_agree_one_to_one() -> None:
    forward = [(0, 0), (1, 1), (1, 2), (2, 3), (3, 4)]
    reverse = [(0, 0), (1, 1), (1, 2), (3, 4), (4, 4)]
    # (1, 1) and (1, 2) share source word 1; (2, 3) and (4, 4) are in one direction only.
    assert one_to_one_links(forward, reverse) == [(0, 0), (3, 4)]


def test_a_term_is_used_when_its_words_appear_in_a_row_as_written() -> None:
    assert words("Ein Fußball-Spiel, drei Hunde.") == ["Ein", "Fußball-Spiel", ",", "drei", "Hunde", "."]
    assert term_used("Hund", "Der Hund schläft.")
    assert not term_used("Hund", "Der hund schläft.")  # as written: case counts
    assert not term_used("Hund", "Die Hunde schlafen.") and not term_used("Spiel", "Ein Fußball-Spiel.")
    assert term_used("New York", "In New York.") and not term_used("New York", "New Yorker York.")
    glossary = Glossary.from_pairs([("dog", "Hund"), ("cat", "Katze")])
    counts = term_use(
        glossary,
        ["the dog and the cat", "a dog", "nothing"],
        ["Der Hund und die Katze.", "Ein Köter.", "Nichts."],
        ["Der Hund und die Mieze.", "Ein Hund.", "Nichts."],
    )
    # Matches: dog, cat, dog; used: 2; the references use Hund twice, of which the output has one.
    assert counts == (3, 2, 2, 1)


@pytest.mark.skipif(
    importlib.util.find_spec("eflomal") is None, reason="eflomal (only --build-test needs it)"
)
def test_the_glossary_is_built_from_aligned_validation_pairs() -> None:
    train = [("the dog runs", "der Hund rennt"), ("a dog sleeps", "ein Hund schläft")] * 40
    train += [("the cat runs", "die Katze rennt"), ("a cat sleeps", "eine Katze schläft")] * 40
    train += [("the a", "der ein")] * 100  # "the" and "a" (and "der", "ein") the most frequent by far
    valid = [("the dog sleeps", "der Hund schläft"), ("a dog runs", "ein Hund rennt")]
    entries = build_glossary_test(train, valid, function_words=2)
    assert ("dog", "Hund") in entries
    assert all(source not in ("the", "a") for source, _ in entries)  # function words are no terms


def test_a_run_on_the_tiny_model_writes_its_record(trained_run: Path, tmp_path: Path, capsys) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for side, name in (("en", "valid.en"), ("de", "valid.de")):
        text = (trained_run / "data" / name).read_bytes()
        (corpus / f"val.{side}.gz").write_bytes(gzip.compress(text))
    test = tmp_path / "terms.tsv"
    test.write_text("the\tdie\ndog\tHund\n", encoding="utf-8")
    output = tmp_path / "glossary.md"
    main(["--checkpoint", str(trained_run), "--corpus", str(corpus), "--test", str(test), "--beam", "2",
          "--output", str(output)])  # fmt: skip
    record = output.read_text(encoding="utf-8")
    assert "CPU: " in record and "beam 2" in record and "2 entries matching" in record
    rows = [line for line in record.splitlines() if line.startswith("| ") and "%" in line]
    assert [row.split(" | ")[0] for row in rows] == [
        "| without glossary",
        "| with glossary",
        "| each sentence given only the terms its reference uses",
    ]
    with_row = rows[1].split(" | ")
    assert with_row[1].endswith("%") and float(with_row[1].split("= ")[1].rstrip("%")) >= 90.0
    with pytest.raises(SystemExit):
        main(["--checkpoint", str(trained_run), "--beam", "1"])
    assert "--beam must be at least 2" in capsys.readouterr().err
    test.write_text("dog Hund\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"python -m benchmarks\.glossary: --glossary .* line 1"):
        main(["--checkpoint", str(trained_run), "--corpus", str(corpus), "--test", str(test)])
