"""The curves plot of an experiment's runs: one colour per variant, one dash per seed, NLL on both panels."""

import json
import math
from pathlib import Path

import pytest

from transformer.experiments.common.curves import (
    curve_styles,
    draw_curves,
    plot_curves,
    read_nll_curves,
    summarize_curves,
)
from transformer.experiments.table2.report import dropout_rows
from transformer.experiments.table2.settings import build_plan
from transformer.experiments.table2.verdicts import render_verdicts


def test_each_variant_keeps_one_colour_and_each_seed_one_line_style() -> None:
    variants = ["base", "D1", "D2", "D3", "D4"]
    records = [{"variant": variant, "seed": seed} for variant in variants for seed in (1, 5, 7)]
    styles = curve_styles(records, variants)
    assert len(set(styles.values())) == 15  # no two runs drawn alike (the old colour cycle repeated at 10)
    assert styles[("base", 1)] == ("C0", "-") and styles[("D4", 7)] == ("C4", ":")
    for variant in variants:
        assert len({styles[(variant, seed)][0] for seed in (1, 5, 7)}) == 1
    for seed in (1, 5, 7):
        assert len({styles[(variant, seed)][1] for variant in variants}) == 1


def write_metrics(path: Path, train_nll: list[float], valid_perplexity: list[float]) -> None:
    lines = [
        {"kind": "train", "step": 10 * (index + 1), "train_nll": value}
        for index, value in enumerate(train_nll)
    ]
    lines += [
        {"kind": "valid", "step": 20 * (index + 1), "valid_loss": 99.0, "valid_perplexity": value}
        for index, value in enumerate(valid_perplexity)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")


def test_the_validation_panel_draws_log_perplexity_not_the_smoothed_loss(tmp_path: Path) -> None:
    (tmp_path / "curves").mkdir()
    records = []
    for variant, seed, perplexities in (
        ("base", 1, [40.0, 20.0]),
        ("D1", 1, [30.0, 15.0]),
        ("D1", 2, [32.0, 16.0]),
    ):
        relative = f"curves/{variant}-s{seed}.metrics.jsonl"
        write_metrics(tmp_path / relative, [5.0, 4.0, 3.5, 3.0], perplexities)
        records.append({"variant": variant, "seed": seed, "curves": relative})
    figure = draw_curves(records, tmp_path, ["base", "D1"])
    training, validation = figure.axes
    lines = {line.get_label(): line for line in validation.get_lines()}
    assert list(lines) == ["base s1", "D1 s1", "D1 s2"]
    assert list(lines["D1 s2"].get_xdata()) == [20, 40]
    assert [round(value, 6) for value in lines["D1 s2"].get_ydata()] == [
        round(math.log(32.0), 6),
        round(math.log(16.0), 6),
    ]
    assert lines["D1 s1"].get_color() == lines["D1 s2"].get_color() != lines["base s1"].get_color()
    assert lines["D1 s1"].get_linestyle() != lines["D1 s2"].get_linestyle()
    assert list(training.get_lines()[0].get_ydata()) == [5.0, 4.0, 3.5, 3.0]
    assert plot_curves(records, tmp_path, ["base", "D1"], tmp_path / "curves.png") == tmp_path / "curves.png"
    assert (tmp_path / "curves.png").stat().st_size > 1000
    assert plot_curves(records, tmp_path, ["D2"], tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()


def test_row_d_curves_draw_base_and_the_dropout_rows_only() -> None:
    # D3 and D4 change label smoothing, another question; fifteen curves hid the nine that answer this one.
    assert dropout_rows(build_plan("cpu")) == ["base", "D1", "D2"]
    assert dropout_rows(build_plan("paper")) == ["base", "D1", "D2"]


def test_a_damaged_metrics_line_is_named_by_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "curves").mkdir()
    write_metrics(tmp_path / "curves/base-s1.metrics.jsonl", [5.0], [40.0])
    with (tmp_path / "curves/base-s1.metrics.jsonl").open("a", encoding="utf-8") as metrics:
        metrics.write('{"kind": "valid", "step": 9\n')
    with pytest.raises(ValueError, match=r"base-s1\.metrics\.jsonl, line 3: not valid JSON"):
        read_nll_curves(tmp_path, "curves/base-s1.metrics.jsonl")


def test_the_curve_summary_finds_the_lowest_validation_nll_and_the_last_gap(tmp_path: Path) -> None:
    (tmp_path / "curves").mkdir()
    # Validation at steps 20, 40, 60: falls, then rises (overfits); training logged every 10 steps.
    write_metrics(tmp_path / "curves/D1-s1.metrics.jsonl", [5.0, 4.0, 3.0, 2.5, 2.2, 2.0], [30.0, 20.0, 25.0])
    write_metrics(tmp_path / "curves/base-s1.metrics.jsonl", [5.0, 4.5, 4.0, 3.8], [40.0, 30.0])
    records = [
        {"variant": "D1", "seed": 1, "curves": "curves/D1-s1.metrics.jsonl"},
        {"variant": "base", "seed": 1, "curves": "curves/base-s1.metrics.jsonl"},
        {"variant": "D3", "seed": 1, "curves": "curves/D1-s1.metrics.jsonl"},  # not asked for
    ]
    lines = summarize_curves(records, tmp_path, ["base", "D1"]).splitlines()
    assert len(lines) == 4 and lines[2].startswith("| base s1 |") and lines[3].startswith("| D1 s1 |")
    lowest, last = math.log(20.0), math.log(25.0)
    assert lines[3] == (
        f"| D1 s1 | {lowest:.3f} (40) | {last:.3f} (60) | +{last - lowest:.3f} | 2.000 | +{last - 2.0:.3f} |"
    )
    # base: still falling at its last validation (step 40), where the training NLL logged is 3.8.
    base_last = math.log(30.0)
    expected = (
        f"| base s1 | {base_last:.3f} (40) | {base_last:.3f} (40) | +0.000 | 3.800 | -{3.8 - base_last:.3f} |"
    )
    assert lines[2] == expected
    assert summarize_curves(records, tmp_path, ["D2"]) == ""


def test_the_table2_section_summarizes_row_d_curves_once_a_dropout_row_has_them(tmp_path: Path) -> None:
    (tmp_path / "curves").mkdir()
    write_metrics(tmp_path / "curves/base-s1.metrics.jsonl", [5.0, 4.0], [40.0])
    plan = build_plan("tiny")
    base = {"variant": "base", "seed": 1, "dev_bleu": 20.0, "dev_perplexity": 40.0, "dirty": False}
    base_only = render_verdicts(plan, [{**base, "curves": "curves/base-s1.metrics.jsonl"}], tmp_path)
    assert "Row D's curves" not in base_only  # base alone answers nothing about dropout
    dropout = {**base, "variant": "D1", "curves": "curves/base-s1.metrics.jsonl"}
    section = render_verdicts(plan, [{**base, "curves": "curves/base-s1.metrics.jsonl"}, dropout], tmp_path)
    assert "Row D's curves" in section and "| base s1 |" in section and "| D1 s1 |" in section


def test_a_perplexity_that_is_not_positive_is_named_by_file_and_step(tmp_path: Path) -> None:
    # Its log is undefined: the report used to stop with a bare "math domain error".
    (tmp_path / "curves").mkdir()
    write_metrics(tmp_path / "curves/D1-s1.metrics.jsonl", [5.0, 4.0], [30.0, 0.0])
    records = [{"variant": "D1", "seed": 1, "curves": "curves/D1-s1.metrics.jsonl"}]
    with pytest.raises(
        ValueError, match=r"D1-s1\.metrics\.jsonl: valid_perplexity at step 40 is 0\.0, not a"
    ):
        summarize_curves(records, tmp_path, ["D1"])
    with pytest.raises(ValueError, match=r"valid_perplexity at step 40"):
        draw_curves(records, tmp_path, ["D1"])
