"""Table 1 measured (#17): end to end at tiny scale, slopes, path lengths, sequential steps and FLOP counts."""

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from transformer.cli import main
from transformer.experiments.table1.analysis import crossover, fit_loglog_slope, flops_crossover, slopes
from transformer.experiments.table1.flops import analytic_flops, check_recurrent_formula, counted_flops
from transformer.experiments.table1.layers import RecurrentLayer, banded_attention
from transformer.experiments.table1.paths import (
    expected_path,
    layer_graph_depth,
    layers_until_connected,
    recurrent_steps_until_connected,
)
from transformer.experiments.table1.report import render_report
from transformer.experiments.table1.settings import TIMED_KINDS, scale_settings
from transformer.experiments.table1.timing import measure_points, predicted_seconds
from transformer.model.masks import build_window_mask
from transformer.model.scaled_dot_product_attention import scaled_dot_product_attention

TINY = scale_settings("tiny")


def test_tiny_scale_runs_end_to_end_through_the_cli(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    output_dir = tmp_path / "table1"
    status = main(
        [
            "experiment",
            "table1",
            "--scale",
            "tiny",
            "--device",
            "cpu",
            "--output-dir",
            str(output_dir),
            "--allow-dirty",
        ]
    )
    assert status == 0
    assert f"table1: report: {output_dir / 'table1.md'}" in capsys.readouterr().out

    records = [json.loads(line) for line in (output_dir / "measurements.jsonl").read_text().splitlines()]
    assert len(records) == len(TINY.lengths) * len(TINY.widths) * len(TIMED_KINDS)
    assert {(r["layer"], r["n"], r["d"]) for r in records} == {
        (layer, n, d) for layer in TIMED_KINDS for n in TINY.lengths for d in TINY.widths
    }
    for record in records:
        assert record["seconds"] > 0 and record["repeats"] >= TINY.min_repeats
        assert record["flops"] > 0 and record["memory_bytes"] > 0 and record["machine"]
        if record["layer"] != "recurrent":  # counted, and equal to the formula
            assert record["flops"] == record["flops_analytic"]

    table = (output_dir / "table1.md").read_text(encoding="utf-8")
    sections = {part.split("\n", 1)[0]: part for part in table.split("\n## ")}

    def rows(section: str) -> dict[str, str]:
        lines = sections[section].splitlines()
        return {line.split(" | ")[0].lstrip("| "): line for line in lines if line.startswith("| ")}

    complexity = rows("Complexity per layer")
    assert complexity["Self-attention"].startswith("| Self-attention | O(n²·d) | 2, 1 |")
    assert complexity["Recurrent (LSTM)"].startswith("| Recurrent (LSTM) | O(n·d²) | 1, 2 |")
    structure_rows = rows("Sequential operations and maximum path length")
    assert structure_rows["Self-attention"].endswith("| O(1) | 1 layer | 1 |")
    recurrent = structure_rows["Recurrent (LSTM)"]
    assert "O(n): +" in recurrent
    assert recurrent.endswith(f"| {TINY.path_length} recurrent steps (1 layer) | {TINY.path_length} |")
    contiguous = expected_path("convolution", TINY.path_length, TINY)
    assert structure_rows["Convolutional (kernel k, contiguous)"].endswith(
        f"| {contiguous} layers | {contiguous} |"
    )
    crossing = rows("Where self-attention stops being cheaper than recurrence")
    assert set(crossing) == {"d", "16", "32"}
    assert crossing["16"].startswith("| 16 | 8 |") and crossing["32"].startswith("| 32 | 16 |")
    assert "None: every point was timed." in sections["Skipped points"]
    assert (output_dir / "time_vs_n.png").stat().st_size > 1000
    assert (output_dir / "flops_vs_n.png").stat().st_size > 1000
    structure = json.loads((output_dir / "structure.json").read_text())
    assert structure["recurrent_flops_check"][0] == structure["recurrent_flops_check"][1]
    assert all(found["path"] == found["path_expected"] for found in structure["layers"].values())


@pytest.mark.parametrize(
    ("flag", "value"), [("--seeds", "2"), ("--parallel", "2"), ("--only", "base"), ("--set", "a.b=1")]
)
def test_training_options_are_refused_for_a_measurement(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    output_dir = tmp_path / "table1"
    argv = ["experiment", "table1", "--scale", "tiny", "--output-dir", str(output_dir), flag, value]
    assert main(argv) == 2
    error = capsys.readouterr().err.strip()
    assert (
        error
        == f"transformer experiment: error: table1 is a measurement, not a training: {flag} does not apply"
    )
    assert not output_dir.exists()


def test_loglog_slopes_are_exact_on_power_laws() -> None:
    lengths = [16.0, 32.0, 64.0, 128.0]
    assert fit_loglog_slope(lengths, [3 * n**2 for n in lengths]) == pytest.approx(2.0, abs=1e-12)
    assert fit_loglog_slope(lengths, [0.5 * n**-0.5 for n in lengths]) == pytest.approx(-0.5, abs=1e-12)
    with pytest.raises(ValueError, match="two distinct"):
        fit_loglog_slope([4.0, 4.0], [1.0, 2.0])

    settings = replace(TINY, lengths=(8, 16, 32, 64, 128), widths=(16, 32, 64), reference_length=32)
    records = [
        {"layer": "self_attention", "n": n, "d": d, "seconds": 1e-9 * n * n * d, "flops": 7 * n * d**3}
        for n in settings.lengths
        for d in settings.widths
    ]
    fitted = slopes(records, "self_attention", settings)
    assert all(value == pytest.approx(2.0) for value in fitted["time_n"].values())
    assert all(value == pytest.approx(1.0) for value in fitted["flops_n"].values())
    assert fitted["time_d"] == pytest.approx(1.0) and fitted["flops_d"] == pytest.approx(3.0)


def test_a_missing_time_leaves_the_slope_to_the_points_measured() -> None:
    settings = replace(TINY, lengths=(8, 16, 32), widths=(16,), reference_length=16)
    records = [{"layer": "convolution", "n": n, "d": 16, "seconds": 1e-6 * n, "flops": n} for n in (8, 16)]
    records.append({"layer": "convolution", "n": 32, "d": 16, "seconds": None, "flops": 32})
    fitted = slopes(records, "convolution", settings)
    assert fitted["time_n"][16] == pytest.approx(1.0) and fitted["time_d"] is None


def test_self_attention_connects_every_position_in_one_layer() -> None:
    assert layers_until_connected("self_attention", 32, 8, TINY, max_layers=4) == 1


@pytest.mark.parametrize(("length", "kernel"), [(16, 3), (17, 5), (10, 2)])
def test_contiguous_convolutions_need_ceil_n_minus_1_over_k_minus_1_layers(length: int, kernel: int) -> None:
    settings = replace(TINY, kernel=kernel)
    expected = math.ceil((length - 1) / (kernel - 1))
    assert layers_until_connected("convolution", length, 4, settings, max_layers=length) == expected
    assert layers_until_connected("separable_convolution", length, 4, settings, max_layers=length) == expected


@pytest.mark.parametrize(("length", "kernel", "expected"), [(27, 3, 3), (28, 3, 4), (16, 2, 4), (64, 4, 3)])
def test_dilated_convolutions_need_log_k_n_layers(length: int, kernel: int, expected: int) -> None:
    settings = replace(TINY, kernel=kernel)
    assert expected_path("dilated_convolution", length, settings) == expected
    assert layers_until_connected("dilated_convolution", length, 4, settings, max_layers=length) == expected


@pytest.mark.parametrize("name", ["restricted_masked", "restricted_banded"])
def test_restricted_attention_needs_ceil_n_minus_1_over_r_layers(name: str) -> None:
    settings = replace(TINY, window=3, num_heads=2)
    assert layers_until_connected(name, 20, 4, settings, max_layers=20) == math.ceil(19 / 3)


def test_an_lstm_path_takes_n_sequential_steps() -> None:
    assert recurrent_steps_until_connected(12, 4) == 12
    # One dependent cell step per position in the unrolled graph; attention's depth does not grow with n.
    depths = [layer_graph_depth("recurrent", n, 4, TINY) for n in (8, 16, 24)]
    assert depths[2] - depths[1] == depths[1] - depths[0] > 0
    assert layer_graph_depth("self_attention", 8, 4, TINY) == layer_graph_depth("self_attention", 24, 4, TINY)


def test_attention_flops_equal_the_formula() -> None:
    n, d = 32, 16
    flops, source = counted_flops("self_attention", n, d, TINY)
    # Forward: Q, K, V and output projections 4·2nd², scores and weighted sum 2·2n²d; backward twice that.
    assert flops == 3 * (8 * n * d * d + 4 * n * n * d) == analytic_flops("self_attention", n, d, TINY)
    assert "explicit" in source


@pytest.mark.parametrize(
    "name", ["convolution", "separable_convolution", "restricted_masked", "restricted_banded"]
)
def test_counted_flops_equal_the_formula_for_the_other_layers(name: str) -> None:
    assert counted_flops(name, 24, 8, TINY)[0] == analytic_flops(name, 24, 8, TINY)


def test_the_analytic_lstm_count_matches_the_counter_on_the_unrolled_cell() -> None:
    counted, analytic = check_recurrent_formula(10, 6, TINY)
    assert counted == analytic == 48 * 10 * 36 - 8 * 36


def test_the_unrolled_lstm_computes_what_nn_lstm_computes() -> None:
    torch.manual_seed(0)
    layer = RecurrentLayer(6).double()
    hidden = torch.randn(2, 9, 6, dtype=torch.float64)
    torch.testing.assert_close(layer.unrolled(hidden), layer(hidden))


@pytest.mark.parametrize(("length", "window"), [(16, 2), (17, 3), (5, 8), (1, 1)])
def test_banded_attention_equals_window_masked_attention(length: int, window: int) -> None:
    torch.manual_seed(0)
    query, key, value = (torch.randn(2, 3, length, 4, dtype=torch.float64) for _ in range(3))
    mask = build_window_mask(length, length, window, causal=False)
    expected, _ = scaled_dot_product_attention(query, key, value, mask, 0.0, False, "explicit")
    torch.testing.assert_close(banded_attention(query, key, value, window), expected)


def test_points_over_budget_are_skipped_and_reported(tmp_path: Path) -> None:
    settings = replace(TINY, lengths=(8, 16), widths=(16,), point_budget_seconds=1e-9)
    records = measure_points(settings, torch.device("cpu"), tmp_path / "m.jsonl", lambda line: None)
    assert all(r["seconds"] is not None for r in records if r["n"] == 8)
    skipped = [r for r in records if r["n"] == 16]
    assert skipped and all(
        r["seconds"] is None and "took" in r["skipped"] and r["flops"] > 0 for r in skipped
    )
    assert len((tmp_path / "m.jsonl").read_text().splitlines()) == len(records)
    structure = {
        name: {
            "path": 1,
            "path_expected": 1,
            "path_unit": "layer",
            "depth_short": 1,
            "depth_long": 1,
            "depth_per_position": 0.0,
            "sequential": 1,
        }
        for name in [*TIMED_KINDS, "dilated_convolution"]
    }
    report = render_report(settings, "tiny", records, structure, (1, 1), 1.0)
    assert "| self_attention | 16 | 16 | n = 8 took" in report


def test_predictions_and_crossover() -> None:
    assert predicted_seconds([], 32) is None
    assert predicted_seconds([(8, 1.0), (16, 4.0)], 32) == pytest.approx(16.0)
    assert predicted_seconds([(8, 1.0), (16, 1.0)], 32) == pytest.approx(2.0)  # at least linear
    settings = replace(TINY, lengths=(8, 16, 32, 64), widths=(32,))
    records = []
    for n in settings.lengths:
        records.append({"layer": "self_attention", "n": n, "d": 32, "seconds": n * n, "flops": n * n})
        records.append({"layer": "recurrent", "n": n, "d": 32, "seconds": 20 * n, "flops": 30 * n})
    found = crossover(records, 32, settings)
    assert found["time_faster"] == [8, 16] and found["time_slower"] == [32, 64]
    assert found["time_largest"] == 16 and found["flops_largest"] == 16 and found["paper"] == 16


@pytest.mark.parametrize("d_model", [128, 512, 1024])
def test_attention_needs_fewer_flops_than_the_lstm_up_to_n_2d_minus_1_not_d(d_model: int) -> None:
    settings = scale_settings("cpu")
    assert flops_crossover(d_model, settings) == 2 * d_model - 1
    # By hand: attention 24nd^2 + 12n^2 d, the LSTM 48nd^2 - 8d^2 (times the batch).
    batch, n = settings.batch, 2 * d_model
    attention = batch * (24 * n * d_model**2 + 12 * n**2 * d_model)
    recurrent = batch * (48 * n * d_model**2 - 8 * d_model**2)
    assert attention >= recurrent and attention - recurrent == batch * 8 * d_model**2
