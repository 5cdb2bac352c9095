"""The trainer's metrics log: written by MetricsLog, read back by read_metrics_series (plots and reports)."""

import json
from pathlib import Path

import pytest

from transformer.metrics_log import MetricsLog, read_metrics_series


def test_a_log_reads_back_sorted_one_point_per_step_the_last_logged(tmp_path: Path) -> None:
    log = MetricsLog(tmp_path / "metrics.jsonl")
    for step, nll in ((100, 5.0), (200, 4.0), (300, 3.5)):
        log.write({"kind": "train", "step": step, "train_nll": nll, "learning_rate": step * 1e-5})
    log.write({"kind": "valid", "step": 300, "valid_perplexity": 40.0, "note": "a string is not read"})
    # A copy taken before the trainer dropped a resumed run's repeated steps: step 300 again, redone.
    log.write({"kind": "train", "step": 300, "train_nll": 3.25})
    log.write({"kind": "config", "step": 0, "train_nll": "not a train record"})
    with (tmp_path / "metrics.jsonl").open("a", encoding="utf-8") as handle:
        handle.write("\n")  # a blank line is read past
    series = read_metrics_series(
        tmp_path / "metrics.jsonl",
        [("train", "train_nll"), ("valid", "valid_perplexity"), ("valid", "valid_loss"), ("train", "note")],
    )
    assert series[("train", "train_nll")] == [(100, 5.0), (200, 4.0), (300, 3.25)]
    assert series[("valid", "valid_perplexity")] == [(300, 40.0)]
    assert series[("valid", "valid_loss")] == [] and series[("train", "note")] == []


def test_kindless_records_are_told_by_their_keys(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    lines = [
        {"step": 20, "train_loss": 3.0},
        {"step": 10, "train_loss": 4.0},
        {"step": 20, "valid_loss": 3.5},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + "\n", encoding="utf-8")
    series = read_metrics_series(path, [("train", "train_loss"), ("valid", "valid_loss")])
    assert series == {("train", "train_loss"): [(10, 4.0), (20, 3.0)], ("valid", "valid_loss"): [(20, 3.5)]}


def test_a_wanted_value_must_be_a_number_and_others_are_not_checked(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"kind": "train", "step": 5, "train_nll": 2.0, "tokens_per_second": "fast"}\n')
    assert read_metrics_series(path, [("train", "train_nll")])[("train", "train_nll")] == [(5, 2.0)]
    with pytest.raises(ValueError, match=r"metrics\.jsonl, line 1: 'tokens_per_second' must be a number"):
        read_metrics_series(path, [("train", "tokens_per_second")])
    path.write_text('{"kind": "valid", "step": "5", "valid_loss": 2.0}\n')
    with pytest.raises(ValueError, match=r"line 1: 'step' must be a number, got '5'"):
        read_metrics_series(path, [("valid", "valid_loss")])


def test_a_file_that_is_not_a_log_is_named(tmp_path: Path) -> None:
    (tmp_path / "binary.jsonl").write_bytes(b'{"step": 1}\n\xff\xfe')
    with pytest.raises(ValueError, match=r"metrics file .*binary\.jsonl is not UTF-8 text \(byte 12\)"):
        read_metrics_series(tmp_path / "binary.jsonl", [("train", "train_loss")])
    with pytest.raises(ValueError, match=r"metrics file .* is a directory"):
        read_metrics_series(tmp_path, [("train", "train_loss")])
    with pytest.raises(ValueError, match=r"metrics file .*absent\.jsonl does not exist"):
        read_metrics_series(tmp_path / "absent.jsonl", [("train", "train_loss")])
