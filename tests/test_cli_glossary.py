"""``transformer translate --glossary`` and ``evaluate --glossary`` end to end, and their refusals in one line."""

from pathlib import Path

import pytest

from transformer.cli import main


@pytest.fixture
def texts(tmp_path: Path) -> tuple[Path, Path]:
    sources = tmp_path / "src.en"
    sources.write_text("the cat sees the dog\na small house\n\nthe dog runs\n", encoding="utf-8")
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("dog\tHund\nsmall house\tHäuschen\n", encoding="utf-8")
    return sources, glossary


def error_of(capsys, *arguments: str) -> str:
    capsys.readouterr()
    assert main(list(arguments)) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1, error
    return error


def test_translate_with_a_glossary_uses_its_terms(trained_run: Path, texts, tmp_path: Path, capsys) -> None:
    sources, glossary = texts
    output = tmp_path / "out.de"
    arguments = ["translate", "--checkpoint", str(trained_run), "--input", str(sources), "--beam", "4"]
    assert main([*arguments, "--output", str(output), "--glossary", str(glossary)]) == 0
    lines = output.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4 and lines[2] == ""
    assert "Hund" in lines[0].replace(".", " ").split() and "Hund" in lines[3].replace(".", " ").split()
    assert "Häuschen" in lines[1]
    assert main([*arguments, "--output", str(tmp_path / "plain.de")]) == 0
    assert "Häuschen" not in (tmp_path / "plain.de").read_text(encoding="utf-8")


def test_a_bad_glossary_line_fails_before_anything_is_written(
    trained_run: Path, texts, tmp_path: Path, capsys
) -> None:
    sources, glossary = texts
    glossary.write_text("dog\tHund\ncat Katze\n", encoding="utf-8")
    output = tmp_path / "out.de"
    error = error_of(capsys, "translate", "--checkpoint", str(trained_run), "--input", str(sources),
                     "--output", str(output), "--glossary", str(glossary))  # fmt: skip
    assert f"--glossary {glossary} line 2: expected 'source term<TAB>target term', found 1" in error
    assert not output.exists()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--beam", "1"],
            "--glossary: a glossary needs beam search with a beam size of 2 or more, not greedy",
        ),
        (["--engine", "ctranslate2"], "--glossary applies to --engine pytorch"),
        (["--format", "html"], "does not take --glossary"),
    ],
)
def test_translate_refuses_a_glossary_it_cannot_use(trained_run: Path, texts, capsys, extra, message) -> None:
    sources, glossary = texts
    error = error_of(capsys, "translate", "--checkpoint", str(trained_run), "--input", str(sources),
                     "--glossary", str(glossary), *extra)  # fmt: skip
    assert message in error


def test_the_output_may_not_be_the_glossary(trained_run: Path, texts, capsys) -> None:
    sources, glossary = texts
    before = glossary.read_bytes()
    error = error_of(capsys, "translate", "--checkpoint", str(trained_run), "--input", str(sources),
                     "--glossary", str(glossary), "--output", str(glossary), "--beam", "4")  # fmt: skip
    assert "--glossary" in error and "--output" in error
    assert glossary.read_bytes() == before


def test_evaluate_with_a_glossary(trained_run: Path, texts, tmp_path: Path, capsys) -> None:
    sources, glossary = texts
    references = tmp_path / "ref.de"
    references.write_text("die Katze sieht den Hund\nein Häuschen\n\nder Hund rennt\n", encoding="utf-8")
    output = tmp_path / "out.de"
    assert main(["evaluate", "--checkpoint", str(trained_run), "--source", str(sources), "--reference",
                 str(references), "--glossary", str(glossary), "--beam", "4", "--output", str(output)]) == 0  # fmt: skip
    assert "BLEU" in capsys.readouterr().out
    assert "Häuschen" in output.read_text(encoding="utf-8")
    error = error_of(capsys, "evaluate", "--hypotheses", str(output), "--reference", str(references),
                     "--glossary", str(glossary))  # fmt: skip
    assert "with --hypotheses it does not" in error
