"""The confidence benchmark's statistics (ranks, Spearman, the kept share, the bootstrap) and a run of it."""

from pathlib import Path

import numpy as np
import pytest

from benchmarks.confidence import bootstrap, main, ranks, spearman, top_share_mean


def test_ranks_share_the_mean_rank_among_ties() -> None:
    assert ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [2.5, 0.0, 2.5, 1.0]


def test_spearman_reads_order_only() -> None:
    values = np.array([0.1, 0.5, 0.2, 0.9, 0.4])
    assert spearman(values, values**3 + 7) == pytest.approx(1.0)
    assert spearman(values, -values) == pytest.approx(-1.0)
    assert spearman(values, np.ones(5)) == 0.0
    # One swapped pair of five: 1 - 6 * 2 / (5 * 24) = 0.9.
    assert spearman(np.array([1.0, 2, 3, 4, 5]), np.array([1.0, 2, 3, 5, 4])) == pytest.approx(0.9)


def test_the_most_confident_share_keeps_the_best_when_the_confidence_is_right() -> None:
    quality = np.array([10.0, 90.0, 50.0, 70.0, 30.0])
    assert top_share_mean(quality, quality, 0.6) == pytest.approx((90 + 70 + 50) / 3)
    assert top_share_mean(-quality, quality, 0.6) == pytest.approx((10 + 30 + 50) / 3)


def test_the_bootstrap_is_seeded_and_brackets_its_statistic() -> None:
    generator = np.random.default_rng(0)
    first = generator.normal(size=200)
    second = first + generator.normal(scale=1.0, size=200)
    interval = bootstrap(spearman, [first, second], 200)
    assert interval == bootstrap(spearman, [first, second], 200)
    assert interval.low < interval.value < interval.high and interval.low > 0.4


def test_a_run_on_the_tiny_model_writes_its_record(trained_run: Path, tmp_path: Path, capsys) -> None:
    output = tmp_path / "confidence.md"
    data = trained_run / "data"
    main(["--checkpoint", str(trained_run), "--source", str(data / "valid.en"), "--reference",
          str(data / "valid.de"), "--beam", "2", "--resamples", "20", "--limit", "20", "--output", str(output)])  # fmt: skip
    record = output.read_text(encoding="utf-8")
    assert "20 sentences" in record and "beam 2" in record and "CPU: " in record
    assert record.count("| Spearman(") == 1 + 1 + 5  # the confidence, the score, the combined signals
    assert "its gain over the confidence alone" in record
    with pytest.raises(SystemExit, match=r"python -m benchmarks\.confidence: .*missing"):
        main(["--checkpoint", str(tmp_path / "missing"), "--output", str(output)])
    assert capsys.readouterr().out.count("written to") == 1
