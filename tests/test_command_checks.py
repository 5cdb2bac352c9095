"""What commands check before they read or write: option values, input text, outputs against inputs."""

import argparse
import os
import re
from pathlib import Path

import pytest

from transformer.command_checks import (
    integer_in_range,
    integers_in_range,
    number_in_range,
    refuse_control_characters,
    refuse_outputs_among_inputs,
    seed_selection,
)


def test_a_number_option_takes_finite_values_in_its_range_only() -> None:
    alpha = number_in_range(0.0, 10.0)
    assert [alpha(text) for text in ("0", "0.6", "1e1", "10")] == [0.0, 0.6, 10.0, 10.0]
    for text in ("nan", "NaN", "inf", "-inf", "-0.1", "10.5", "1e400", "abc", ""):
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            alpha(text)
        assert str(refused.value) == f"expected a finite number from 0 to 10, got {text!r}"


def test_an_integer_option_takes_integers_in_its_range_only() -> None:
    offset, last = integer_in_range(0, 1024), integer_in_range(1)
    assert (offset("0"), offset("1024"), last("100000")) == (0, 1024, 100000)
    for text in ("-1", "1025", "100000000", "1.5", "nan", "five"):
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            offset(text)
        assert str(refused.value) == f"expected an integer from 0 to 1024, got {text!r}"
    with pytest.raises(argparse.ArgumentTypeError, match="expected an integer of at least 1, got '0'"):
        last("0")


def test_a_list_option_takes_each_item_in_its_range_in_the_order_given() -> None:
    counts = integers_in_range(1)
    assert counts("64, 1,8") == (64, 1, 8) and counts("3") == (3,)
    for text, item in (("1,x", "x"), ("8,0", "0"), ("1,,2", ""), ("", "")):
        with pytest.raises(argparse.ArgumentTypeError) as refused:
            counts(text)
        assert str(refused.value) == f"expected an integer of at least 1, got {item!r}"


def test_seeds_are_a_count_or_the_seeds_themselves() -> None:
    assert seed_selection("3") == (1, 2, 3)
    assert seed_selection("1,5,7") == (1, 5, 7)
    assert seed_selection("4-6") == (4, 5, 6)
    assert seed_selection("7-7") == (7,)
    assert seed_selection(" 0, 2-3 ") == (0, 2, 3)
    for text, message in [
        ("0", "expected a count from 1 to 100"),
        ("101", "expected a count from 1 to 100"),
        ("1,1", "seed 1 named twice in '1,1'"),
        ("1-3,2", "seed 2 named twice"),
        ("3-1", "range '3-1' in '3-1' ends before it starts"),
        ("1,,2", "expected seeds such as 1,5,7 or 4-6, got '1,,2'"),
        ("-1", "expected seeds such as 1,5,7"),
        ("a", "expected seeds such as 1,5,7"),
        ("1-500", "names more than 100 seeds"),
    ]:
        with pytest.raises(argparse.ArgumentTypeError, match=re.escape(message)):
            seed_selection(text)


def test_control_characters_other_than_tab_are_refused_naming_the_line() -> None:
    refuse_control_characters(["a\tb", "Grüße, 東京", "", "\u2028 is a separator, not a control"], "in.en")
    for line, code, position in (("\x00" * 3000, "0000", 1), ("ok \x1b[0m", "001B", 4), ("a\rb", "000D", 2)):
        with pytest.raises(ValueError) as refused:
            refuse_control_characters(["fine", line], "in.en")
        assert str(refused.value) == (
            f"in.en line 2: control character U+{code} at character {position} (only tab is allowed; is this a "
            "binary file?)"
        )
    with pytest.raises(ValueError, match=r"^standard input line 1: control character U\+007F "):
        refuse_control_characters(["del\x7f"], "standard input")


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    reference = tmp_path / "ref.de"
    reference.write_text("Ein Hund.\n", encoding="utf-8")
    checkpoint = tmp_path / "run" / "checkpoints" / "step-00000944"
    checkpoint.mkdir(parents=True)
    (checkpoint / "model.safetensors").write_bytes(b"weights")
    (tmp_path / "symlink.de").symlink_to(reference)
    os.link(reference, tmp_path / "hardlink.de")
    return {"reference": reference, "checkpoint": checkpoint}


def refusal(**outputs: list[tuple[str, Path]]) -> str:
    inputs = [("--reference", Path("ref.de")), ("--checkpoint", Path("run/checkpoints/step-00000944"))]
    with pytest.raises(ValueError) as refused:
        refuse_outputs_among_inputs(inputs, **outputs)
    return str(refused.value)


def test_an_output_file_that_is_an_input_by_path_or_link_is_refused(files, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("ref.de", "./ref.de", "symlink.de", "hardlink.de", str(files["reference"])):
        assert refusal(output_files=[("--output", Path(name))]) == (
            f"--output {Path(name)}: is --reference ref.de; writing it would destroy it (choose another --output)"
        )
    weights = Path("run/checkpoints/step-00000944/model.safetensors")
    assert refusal(output_files=[("--output", weights)]) == (
        f"--output {weights}: is --checkpoint {weights}; writing it would destroy it (choose another --output)"
    )
    inputs = [("--reference", Path("ref.de")), ("--checkpoint", Path("run/checkpoints/step-00000944"))]
    refuse_outputs_among_inputs(
        inputs, output_files=[("--output", Path("hyp.de")), ("--output", Path("run/x"))]
    )


def test_a_replaced_directory_that_is_or_holds_an_input_is_refused(files, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    for name, relation in (("run/checkpoints/step-00000944", "is"), ("run", "holds"), (".", "holds")):
        assert refusal(replaced_directories=[("--output", Path(name))]).startswith(
            f"--output {name}: {relation} --"
        )
    assert refusal(replaced_directories=[("--output", Path("run"))]) == (
        "--output run: holds --checkpoint run/checkpoints/step-00000944; replacing it would delete it (choose "
        "another --output)"
    )
    inputs = [("--checkpoint", Path("run/checkpoints/step-00000944"))]
    refuse_outputs_among_inputs(inputs, replaced_directories=[("--output", Path("run/averaged"))])


def test_a_directory_written_into_may_hold_inputs_but_not_be_one(files, monkeypatch, tmp_path) -> None:
    monkeypatch.chdir(tmp_path)
    assert refusal(written_directories=[("--output-dir", Path("run/checkpoints/step-00000944"))]) == (
        "--output-dir run/checkpoints/step-00000944: is --checkpoint run/checkpoints/step-00000944; the new "
        "files would join it (choose another --output-dir)"
    )
    inputs = [("--checkpoint", Path("run/checkpoints/step-00000944"))]
    refuse_outputs_among_inputs(inputs, written_directories=[("--output-dir", Path("."))])
